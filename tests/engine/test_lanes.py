"""Lanes decoded in one batch equal each lane decoded alone, and the prompt is prefilled once."""
from __future__ import annotations

import pytest

from engine import DecodeConfig, decode
from engine.errors import ConfigError
from engine.decoding.lanes import LaneBatch, decode_lanes

PROMPT = "The capital of France is"
N = 10
LANES = [
    DecodeConfig(strategy="greedy", max_new_tokens=N),
    DecodeConfig(strategy="sample", max_new_tokens=N, temperature=0.7, seed=1),
    DecodeConfig(strategy="sample", max_new_tokens=N, top_k=20, seed=2),
    DecodeConfig(strategy="sample", max_new_tokens=N, top_p=0.9, seed=2),
    DecodeConfig(strategy="soft", max_new_tokens=N),
    DecodeConfig(strategy="gumbel", max_new_tokens=N, tau=0.5, seed=4),
    DecodeConfig(strategy="sample", max_new_tokens=N - 4, repetition_penalty=1.3, min_p=0.05, seed=5),
]


@pytest.fixture(autouse=True)
def no_eos(tiny, monkeypatch):
    monkeypatch.setattr(tiny, "eos_token_ids", ())   # every lane runs its full length


def test_each_lane_equals_the_lane_decoded_alone(tiny):
    batched = decode_lanes(tiny, PROMPT, LANES)
    assert len(batched) == len(LANES)
    for config, lane in zip(LANES, batched):
        alone = decode(tiny, PROMPT, config)
        assert lane.config == config
        assert lane.best.token_ids == alone.best.token_ids, config
        assert lane.best.text == alone.best.text
        assert len(lane.steps) == config.max_new_tokens
        for a, b in zip(lane.steps, alone.steps):
            assert [c.token_id for c in a.candidates] == [c.token_id for c in b.candidates]
            for ca, cb in zip(a.candidates, b.candidates):
                assert ca.prob == pytest.approx(cb.prob, abs=1e-5)
                assert ca.shaped_prob == pytest.approx(cb.shaped_prob, abs=1e-5)
            assert (a.kv.rows, a.kv.bytes, a.kv.rows_appended) == (b.kv.rows, b.kv.bytes, b.kv.rows_appended)
            if b.feedback is not None:
                assert [n.token_id for n in a.feedback.nearest[:3]] == [n.token_id for n in b.feedback.nearest[:3]]


def test_the_prompt_is_prefilled_once_and_each_step_is_one_pass(tiny):
    calls = []
    hook = tiny.model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(next(v for k, v in kwargs.items()
                                                       if k in ("input_ids", "inputs_embeds") and v is not None).shape),
        with_kwargs=True)
    try:
        traces = decode_lanes(tiny, PROMPT, LANES)
    finally:
        hook.remove()
    prompt_len = len(traces[0].prompt_token_ids)
    assert calls[0][:2] == (1, prompt_len)                          # one row: the shared prefill
    assert all(shape[:2] == (len(LANES), 1) for shape in calls[1:])   # then one position per lane
    assert len(calls) == N                                          # the longest lane's steps, no more


def test_stop_keeps_what_was_decoded(tiny):
    seen = []

    def on_step(lane, step):
        seen.append((lane, step.index))
        return not (lane == 0 and step.index == 3)

    batch = LaneBatch(tiny, PROMPT, LANES[:3])
    traces = batch.run(on_step)
    assert [len(t.steps) for t in traces] == [4, 4, 4]
    assert seen[:3] == [(0, 0), (1, 0), (2, 0)]
    assert traces[1].best.token_ids == decode(tiny, PROMPT, LANES[1]).best.token_ids[:4]


def test_beam_and_mixed_chat_are_refused(tiny):
    with pytest.raises(ConfigError, match="beam"):
        LaneBatch(tiny, PROMPT, [DecodeConfig(strategy="beam")])
    with pytest.raises(ConfigError, match="chat"):
        LaneBatch(tiny, PROMPT, [DecodeConfig(), DecodeConfig(chat=True)])
    with pytest.raises(ConfigError, match="lanes"):
        LaneBatch(tiny, PROMPT, [])


def test_every_lane_reports_the_shared_prefill_time(tiny):
    traces = decode_lanes(tiny, PROMPT, LANES[:3])
    prefill = {trace.timings["prefill_s"] for trace in traces}
    assert len(prefill) == 1                                        # one pass, one time, for all lanes
    (seconds,) = prefill
    assert 0 < seconds <= min(trace.steps[0].seconds for trace in traces)   # part of the first step
