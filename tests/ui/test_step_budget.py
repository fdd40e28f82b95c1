"""Beam tree and KV cache keep one request within the server's budget of decoding steps x paths, as
Compare does, and say so: 8 beams x 1,024 tokens would be minutes of CPU for one click."""
from __future__ import annotations

import pytest

from app_helpers import PROMPT, open_with


def notes(at, words: str) -> list:
    return [i.value for i in at.info if words in i.value]


def test_beam_tree_keeps_beams_times_tokens_within_the_budget_and_says_so(tiny_llama_folder, monkeypatch):
    """4 beams and a budget of 40 steps leave 40 // 4 = 10 tokens."""
    _, folder = tiny_llama_folder
    monkeypatch.setenv("DECODESCOPE_COMPARE_STEPS", "40")
    at = open_with("beam_tree", params={"num_beams": 4},
             state={"model": folder, "prompt": PROMPT, "max_new_tokens": 20})
    assert not at.error, [e.value for e in at.error]
    capped = notes(at, "40 decoding steps")
    assert len(capped) == 1 and "10 new tokens here, not 20" in capped[0] and "4 beams" in capped[0], capped
    assert "DECODESCOPE_COMPARE_STEPS" in capped[0] and "fewer beams" in capped[0]
    trace = at.session_state["beam_trace"]
    assert trace.config.num_beams == 4 and trace.config.max_new_tokens == 10 and len(trace.steps) <= 10

    at.slider(key="num_beams").set_value(8).run()              # 40 // 8 = 5
    assert any("5 new tokens here, not 20" in n for n in notes(at, "decoding steps"))
    assert at.session_state["beam_trace"].config.max_new_tokens == 5

    monkeypatch.setenv("DECODESCOPE_COMPARE_STEPS", "1000")      # room for 8 x 20: no cap, no note
    at.run()
    assert not notes(at, "decoding steps")
    assert at.session_state["beam_trace"].config.max_new_tokens == 20


@pytest.mark.parametrize("strategy, width", [("beam", 4 + 1 + 2), ("greedy", 1 + 2)])
def test_kv_cache_keeps_its_decodes_within_the_budget_and_says_so(tiny_llama_folder, monkeypatch, strategy, width):
    """The page decodes its trace (4 beams, or greedy), greedy beside a beam search, and soft (two paths)."""
    _, folder = tiny_llama_folder
    monkeypatch.setenv("DECODESCOPE_COMPARE_STEPS", "40")
    at = open_with("kv_cache", params={"kv_strategy": strategy, "kv_beams": 4},
             state={"model": folder, "prompt": PROMPT, "max_new_tokens": 20})
    assert not at.error, [e.value for e in at.error]
    expected = 40 // width                                     # 5 with beams, 13 for greedy
    capped = notes(at, "40 decoding steps")
    assert len(capped) == 1 and f"{expected} new tokens here, not 20" in capped[0], [i.value for i in at.info]
    for key in ("kv_trace", "kv_greedy", "kv_soft"):
        assert at.session_state[key].config.max_new_tokens == expected, key
        assert len(at.session_state[key].steps) <= expected

    monkeypatch.setenv("DECODESCOPE_COMPARE_STEPS", "1000")
    at.run()
    assert not notes(at, "decoding steps")
    assert at.session_state["kv_trace"].config.max_new_tokens == 20
