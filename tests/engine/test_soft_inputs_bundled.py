"""The feed-back rules on the bundled models: the cost figures from their shapes, and top-1 Soft Thinking is
greedy decoding on a real vocabulary (Gemma's through its embedding scale)."""
from __future__ import annotations

from engine import DecodeConfig, decode
from engine.soft_inputs.rules import multiply_adds

PROMPT = "The capital of France is"


def _greedy_and_top1(lm) -> None:
    greedy = decode(lm, PROMPT, DecodeConfig(max_new_tokens=6))
    thinking = decode(lm, PROMPT, DecodeConfig(strategy="soft-thinking", soft_top_k=1, temperature=0.7, top_k=30,
                                               top_p=0.95, min_p=0.001, max_new_tokens=6))
    assert [s.emitted_id for s in thinking.steps] == [s.chosen_ids[0] for s in greedy.steps]
    assert [s.kv.rows for s in thinking.steps] == [s.kv.rows for s in greedy.steps]


def test_smollm2_costs_and_top1_soft_thinking(bundled):
    V, d = bundled.facts.vocab_size, bundled.facts.hidden_size
    assert (V, d) == (49_152, 576)
    assert multiply_adds("soft", V, d) == 28_311_552
    assert multiply_adds("soft-thinking", V, d, soft_top_k=10) == 5_760
    _greedy_and_top1(bundled)


def test_gemma_costs_and_top1_soft_thinking(gemma):
    V, d = gemma.facts.vocab_size, gemma.facts.hidden_size
    assert (V, d) == (262_144, 640)
    assert multiply_adds("soft", V, d) == 167_772_160
    assert multiply_adds("soft-thinking", V, d, soft_top_k=10) == 6_400
    _greedy_and_top1(gemma)
