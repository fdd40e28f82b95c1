"""KV-cache numbers on tiny models: bytes from the config by hand, block counts by hand.

Measured bytes must equal rows x 2 x layers x KV heads x head dim x 4 (float32); the paged
accounting must match blocks counted by hand; soft decoding must hold one cache the size
of greedy's at every step.
"""
from __future__ import annotations

import math

import pytest

from engine import DecodeConfig
from engine import decode
from engine.decoding.kv import paged_layout
from engine.inside.kv_trace import cache_steps

PROMPT = "The capital of France is Paris. The capital of"


def hand_bytes_per_row(lm) -> int:
    cfg = lm.model.config
    layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layer
    heads = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    return 2 * layers * kv_heads * (hidden // heads) * 4


def test_hand_numbers_for_the_fixtures(llama, gpt2):
    assert hand_bytes_per_row(llama) == 2 * 2 * 2 * 8 * 4 == 256     # 2 layers, 2 KV heads of 32/4
    assert hand_bytes_per_row(gpt2) == 2 * 2 * 4 * 8 * 4 == 512      # GPT-2 has no grouped KV heads


def test_greedy_rows_bytes_and_blocks(tiny):
    trace = decode(tiny, PROMPT, DecodeConfig(max_new_tokens=12))
    P = len(tiny.tokenizer(PROMPT)["input_ids"])
    per_row = hand_bytes_per_row(tiny)
    steps = cache_steps(trace, per_row)
    for t, cs in enumerate(steps):
        rows = P + t                                  # prompt plus the tokens fed so far
        assert cs.rows == rows
        assert cs.bytes == rows * per_row
        (beam,) = cs.beams
        assert beam.tokens == trace.prompt_token_ids + [s.chosen_ids[0] for s in trace.steps[:t]]
        assert (beam.reused, beam.appended, beam.copied) == ((0, P, 0) if t == 0 else (rows - 1, 1, 0))
        assert len(cs.paged_blocks) == math.ceil(rows / 16)
        assert cs.paged_bytes == math.ceil(rows / 16) * 16 * per_row


def test_beam_slots_and_reorders(llama):
    B = 3
    trace = decode(llama, PROMPT, DecodeConfig(strategy="beam", num_beams=B, max_new_tokens=10))
    P = len(trace.prompt_token_ids)
    per_row = hand_bytes_per_row(llama)
    for t, cs in enumerate(cache_steps(trace, per_row)):
        assert cs.rows == B * (P + t)
        assert cs.bytes == B * (P + t) * per_row
        for slot, beam in enumerate(cs.beams):
            assert len(beam.tokens) == P + t
            assert beam.reused + beam.appended + beam.copied == P + t
            assert beam.tokens[:P] == trace.prompt_token_ids
            if beam.parent != slot:
                assert beam.copied == P + t
        # the engine's own record of copied rows agrees with the per-slot view
        assert sum(b.copied for b in cs.beams) == trace.steps[t].kv.rows_copied
        assert len(cs.paged_blocks) == trace.steps[t].kv.paged_blocks
    # at step 0 every beam continues beam 0, so slots 1.. are copies of slot 0
    first = cache_steps(trace, per_row)[0]
    assert [b.parent for b in first.beams] == [0] * B


class TestPagedByHand:
    def test_shared_prefix_is_stored_once(self):
        a = list(range(40))                       # 2 full blocks + 8
        b = list(range(32)) + [99] * 8            # same first 2 blocks, own last block
        c = list(range(16)) + [7] * 24            # shares only block 0
        layout = paged_layout([a, b, c])
        # block 0: refs 3; block 1 of a and b: refs 2; block 1 of c; three partial last blocks
        assert len(layout.blocks) == 1 + 1 + 1 + 3
        assert sorted(blk.refs for blk in layout.blocks) == [1, 1, 1, 1, 2, 3]
        assert layout.rows == 16 + 16 + 16 + 8 + 8 + 8
        assert layout.shared_blocks == 2
        assert layout.tables[0][:2] == layout.tables[1][:2] and layout.tables[0][0] == layout.tables[2][0]

    def test_partial_blocks_are_never_shared(self):
        layout = paged_layout([[1, 2, 3], [1, 2, 3]])
        assert len(layout.blocks) == 2 and layout.shared_blocks == 0


def test_soft_keeps_one_cache_the_size_of_greedys(tiny):
    n = 10
    greedy = decode(tiny, PROMPT, DecodeConfig(max_new_tokens=n))
    soft = decode(tiny, PROMPT, DecodeConfig(strategy="soft", max_new_tokens=n))
    P = len(greedy.prompt_token_ids)
    per_row = hand_bytes_per_row(tiny)
    common = min(len(greedy.steps), len(soft.steps))
    assert common >= 1
    for t in range(common):
        assert soft.steps[t].kv.rows == greedy.steps[t].kv.rows == P + t
        assert soft.steps[t].kv.bytes == (P + t) * per_row
        assert soft.steps[t].kv.beam_rows == [P + t]


@pytest.mark.parametrize("block_size", [4, 16])
def test_cache_steps_block_size(llama, block_size):
    trace = decode(llama, PROMPT, DecodeConfig(max_new_tokens=5))
    P = len(trace.prompt_token_ids)
    for t, cs in enumerate(cache_steps(trace, 256, block_size=block_size)):
        assert len(cs.paged_blocks) == math.ceil((P + t) / block_size)
        assert cs.paged_bytes == math.ceil((P + t) / block_size) * block_size * 256


@pytest.mark.parametrize("beams", [1, 3])
def test_a_runner_reports_the_bytes_its_cache_holds(llama, beams):
    from engine import make_runner

    config = DecodeConfig(strategy="beam", num_beams=beams) if beams > 1 else DecodeConfig()
    runner = make_runner(llama, PROMPT, config.replace(max_new_tokens=4))
    P = len(runner.prompt_ids)
    assert runner.cache_bytes == 0                          # nothing run yet
    for taken in range(1, 4):
        runner.step()
        rows = P + taken - 1                                # the prompt, then one row per token fed back
        assert runner.cache_bytes == beams * rows * hand_bytes_per_row(llama)
