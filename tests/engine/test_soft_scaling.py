"""Feeding a one-hot p through the soft path is feeding its token: the same logits, on every architecture.

Gemma multiplies each looked-up embedding row by sqrt(hidden) inside its embedding layer, and
`inputs_embeds` skips that layer; a soft vector p^T E must get the same factor. The reference is
the model itself, run on token ids with `input_ids`, without the engine.
"""
from __future__ import annotations

import math

import pytest
import torch

from engine import DecodeConfig
from engine.decoding.decoder import Decoder
from engine.decoding.lanes import decode_lanes
from tiny_models import TINY_BUILDERS

PROMPT = "The capital of France is"
FORCED = [5, 17, 42, 99, 150]     # the tokens fed back, one per step


@pytest.fixture(params=sorted(TINY_BUILDERS), scope="module")
def arch(request):
    return TINY_BUILDERS[request.param]()


def reference_logits(lm, ids: list) -> torch.Tensor:
    """[vocab] next-token logits for `ids`, from the model on token ids, no cache."""
    with torch.no_grad():
        return lm.model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def test_tiny_gemma3_really_scales_its_embeddings():
    lm = TINY_BUILDERS["gemma3"](hidden_size=64)
    ids = torch.tensor([[3, 7]])
    looked_up = lm.model.get_input_embeddings()(ids)
    assert torch.allclose(looked_up, lm.embeddings[ids] * 8.0)         # sqrt(64) = 8, by hand
    assert float(lm.embed_scale) == pytest.approx(math.sqrt(64))


def test_one_hot_vector_gives_the_same_inputs_as_the_token(arch):
    ids = torch.tensor([[3, 7, 11]])
    one_hot = torch.nn.functional.one_hot(ids, arch.facts.vocab_size).float()           # [1, 3, V]
    as_vectors = arch.model_inputs("embeds", one_hot @ arch.embeddings)
    as_ids = arch.model.get_input_embeddings()(ids)
    assert torch.equal(as_vectors, as_ids)


def test_one_hot_soft_decode_gives_the_logits_of_the_token_ids(arch):
    """A soft decode whose every step is forced to a token feeds E[token] (one-hot p^T E) back;
    each step's logits must equal the model's on the same tokens given as ids."""
    config = DecodeConfig(strategy="soft", max_new_tokens=len(FORCED), top_n=200)
    decoder = Decoder(arch, PROMPT, config, forced=dict(enumerate(FORCED)))
    trace = decoder.run()
    assert trace.best.token_ids == FORCED
    for t, step in enumerate(trace.steps):
        expected = reference_logits(arch, trace.prompt_token_ids + FORCED[:t])
        ids = [c.token_id for c in step.candidates]
        got = torch.tensor([c.logit for c in step.candidates])
        assert len(ids) >= 200
        assert torch.allclose(got, expected[ids], atol=1e-4), (
            f"step {t}: max diff {(got - expected[ids]).abs().max():.2e}")


def test_soft_and_greedy_lanes_in_one_batch_agree_with_each_alone(arch):
    """The batched lanes send ids and vectors through the same scaling as a decode alone."""
    soft = DecodeConfig(strategy="soft", max_new_tokens=6, top_n=5)
    greedy = DecodeConfig(strategy="greedy", max_new_tokens=6, top_n=5)
    batched = decode_lanes(arch, PROMPT, [greedy, soft])
    for config, lane in zip((greedy, soft), batched):
        alone = Decoder(arch, PROMPT, config).run()
        assert lane.best.token_ids == alone.best.token_ids
        for a, b in zip(lane.steps, alone.steps):
            assert a.candidates[0].logit == pytest.approx(b.candidates[0].logit, abs=1e-4)
