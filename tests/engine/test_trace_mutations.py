"""Property: damage a real trace anywhere (delete, duplicate, retype or scale any field). The reader
either refuses the file with one sentence, or accepts it, and then everything the Step by step,
Beam tree and Compare pages compute from an uploaded trace works on it.

The pages themselves are driven on damaged files in tests/ui/test_hostile_uploads.py; here the
same functions they call run on many more damaged files, without Streamlit.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

import hostile_traces
from engine import DecodeConfig, Trace, TraceFormatError, decode
from engine.explain.findings import findings_of, timeline
from engine.decoding.rerank import rerank
from figures.beam_tree import beam_tree_figure
from figures.candidates import candidates_figure
from engine.tokens import first_difference
from figures.compare import lanes_figure, token_ids, token_logprobs
from engine.explain.escape import TOKEN_STRATEGIES, escape_grid, loop_step
from figures.stages import stages_figure
from figures.speculative import acceptance_bars, p_and_q, residual_bars, rounds_strip, u_against_ratio
from engine.speculative.summary import acceptance
from engine.decoding.stepper import Stepper
from ui.token_view import token_html, tokens_of


@pytest.fixture(scope="module")
def bases(llama):
    prompt = "The capital of France is"
    return [decode(llama, prompt, DecodeConfig(strategy="greedy", max_new_tokens=4)).to_dict(),
            decode(llama, prompt, DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=3)).to_dict(),
            decode(llama, prompt, DecodeConfig(strategy="soft", max_new_tokens=3)).to_dict(),
            decode(llama, prompt, DecodeConfig(strategy="sample", temperature=0.7, top_k=8, top_p=0.9,
                                               repetition_penalty=1.3, max_new_tokens=3, seed=1)).to_dict(),
            decode(llama, prompt, DecodeConfig(strategy="speculative", draft="early-exit:1", draft_tokens=2,
                                               verify="sample", temperature=1.5, max_new_tokens=4,
                                               seed=2)).to_dict()]


@st.composite
def damage(draw, data):
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(hostile_traces.paths(data)))
        data = hostile_traces.mutate(data, path, draw(st.sampled_from(["delete", "duplicate", "retype", "scale"])),
                                     draw(st.sampled_from(hostile_traces.OTHER_VALUES)),
                                     draw(st.sampled_from(hostile_traces.SCALES)))
    return data


def read(data):
    """The trace, or None after checking the refusal is one sentence."""
    try:
        payload = json.dumps(data).encode()
    except (ValueError, OverflowError):
        return None
    try:
        return Trace.from_json(payload)
    except TraceFormatError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) < 400, message
        return None


def render_everything(trace: Trace) -> None:
    """What the three pages compute from an uploaded trace."""
    viewer = Stepper.viewing(trace)
    for i in range(len(viewer.steps())):
        viewer.go(i)
        step = viewer.current
        candidates_figure(step, trace.config)
        assert step.chosen_ids and step.candidates
    for step in trace.steps:
        if step.stages:
            stages_figure(step)
    if trace.config.strategy in TOKEN_STRATEGIES and loop_step(trace) is not None:
        escape_grid(trace)
    views = tokens_of(trace)
    token_html(views, mode="prob")
    token_html(views, mode="rank")
    findings = findings_of(trace)
    for index in range(len(trace.sequences)):
        timeline(findings, index)
    if trace.nodes:
        for upto in range(len(trace.steps)):
            beam_tree_figure(trace, upto_step=upto)
        for lp in (-2.0, 0.0, trace.config.length_penalty, 3.0):
            rerank(trace, lp)
    ids = token_ids(trace)
    first_difference(ids, ids[::-1])
    assert all(math.isfinite(lp) or lp == float("-inf") or math.isnan(lp) for _, _, lp in token_logprobs(trace))
    lanes_figure([("uploaded", trace), ("again", trace)], {"again": 0}, highlight_step=0)
    if trace.rounds:
        render_speculative(trace)
    Trace.from_json(trace.to_json())            # the download button's file reads back


def render_speculative(trace: Trace) -> None:
    """What the Speculative decoding page computes from an uploaded trace."""
    labels = {key: key for key in ("kept", "rejected", "unchecked", "corrected", "bonus", "plain", "round", "draft",
                                   "title", "p", "q", "overlap", "prob", "rate", "position", "alpha", "keep", "reject")}
    rounds_strip(trace.rounds, labels, selected=(0, 0))
    acc = acceptance(trace)
    acceptance_bars(acc.rates, acc.counts, acc.alpha, labels)
    rnd = trace.rounds[0]            # one position of each kind: the figures read every round alike
    p_and_q(rnd.next_candidates, labels, 0.5, rnd.next_id)
    for draft in rnd.drafts[:2]:
        p_and_q(draft.candidates, labels, 1 - draft.residual_mass, draft.token_id)
        if draft.residual:
            residual_bars(draft.residual, labels)
        if draft.u is not None:
            u_against_ratio(draft.u, draft.p / draft.q if draft.q > 0 else float("inf"), labels)


PROPS = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("base", [0, 1, 2, 3], ids=["greedy", "beam", "soft", "sample-with-stages"])
@PROPS
@given(data=st.data())
def test_a_damaged_trace_is_refused_with_a_sentence_or_renders_everywhere(bases, base, data):
    damaged = data.draw(damage(bases[base]))
    trace = read(damaged)
    if trace is not None:
        render_everything(trace)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_damaged_speculative_trace_is_refused_with_a_sentence_or_renders_everywhere(bases, data):
    """The speculative base (its rounds carry many fields) draws fewer examples: each costs several times more."""
    trace = read(data.draw(damage(bases[4])))
    if trace is not None:
        render_everything(trace)


def test_the_undamaged_traces_render(bases):
    assert bases[3]["steps"][0]["stages"], "the sampled base must carry sampler stages for the mutations to reach"
    for data in bases:
        render_everything(Trace.from_json(json.dumps(data)))
