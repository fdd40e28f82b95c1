"""Property tests (hypothesis) for the engine's shaping and for the trace JSON round trip.

The expected kept sets are computed here from the textbook definitions with plain
sorting in float64, never by calling transformers:
  top-k  keeps every token whose score is at least the k-th largest score (ties at the
         k-th place are all kept);
  top-p  keeps the smallest set of most likely tokens whose mass reaches p: a token is
         kept when the mass of the tokens ranked strictly before it is below p;
  min-p  keeps every token whose probability is at least min_p times the top one's.
Ties and floating point: for tied tokens the definition fixes how many of a tie are
kept, not which ones, so the check counts kept tokens per distinct score. A token
whose fate hangs on a float32 rounding (its cumulative mass or probability ratio
lies within a small tolerance of the threshold) may go either way.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine.config import MAX_VOCAB
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from tiers import examples

from engine import DecodeConfig
from engine.samplers.shaping import build_processors, shape
from engine.trace import (Candidate, FeedBack, KVStep, Neighbour, Node, Sequence, Step, Trace)

TOP_P_TOL = 1e-4      # absolute, on cumulative mass (float32 cumsum over <= 48 tokens)
MIN_P_TOL = 1e-4      # relative, on the probability ratio p_i / p_max

PROPS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Scores: a mix of free floats and a few fixed values, so ties are common.
score_value = st.one_of(
    st.floats(min_value=-30, max_value=30, allow_nan=False, width=32),
    st.sampled_from([0.0, 1.0, -2.5, 3.0, 3.0000002]),
)
scores_strategy = st.lists(score_value, min_size=1, max_size=48)
temperature_strategy = st.one_of(st.just(1.0), st.sampled_from([1e-6, 0.01, 0.5, 2.0, 10.0]),
                                 st.floats(min_value=0.05, max_value=5.0))
top_k_strategy = st.one_of(st.just(0), st.integers(min_value=1, max_value=60))
top_p_strategy = st.one_of(st.just(1.0), st.floats(min_value=1e-6, max_value=1.0, exclude_min=False),
                           st.sampled_from([0.5, 0.9, 0.95, 1e-9]))
min_p_strategy = st.one_of(st.just(0.0), st.floats(min_value=1e-4, max_value=1.0), st.sampled_from([0.05, 0.1, 1.0]))


def scaled(scores: list, temperature: float) -> np.ndarray:
    """The temperature-divided scores, rounded to float32 exactly as the model's logits are."""
    values = np.asarray(scores, dtype=np.float32)
    if temperature != 1.0:
        values = (values / np.float32(temperature)).astype(np.float32)
    return values


def level_bounds(values: np.ndarray, top_k: int, top_p: float, min_p: float) -> dict:
    """{distinct score: (fewest, most) tokens of that score the definitions keep}."""
    levels = sorted(set(values.tolist()), reverse=True)
    count = {v: int((values == v).sum()) for v in levels}
    # top-k: all tokens scoring at least the k-th largest score
    if top_k > 0:
        ordered = sorted(values.tolist(), reverse=True)
        kth = ordered[min(top_k, len(ordered)) - 1]
        alive = [v for v in levels if v >= kth]
    else:
        alive = list(levels)
    # probabilities over the survivors, in float64
    top = alive[0]
    weight = {v: math.exp(v - top) for v in alive}
    total = sum(weight[v] * count[v] for v in alive)
    prob = {v: weight[v] / total for v in alive}
    bounds = {}
    above = 0.0                                   # mass of strictly more likely tokens
    for v in levels:
        if v not in prob:
            bounds[v] = (0, 0)
            continue
        m, pv = count[v], prob[v]
        if top_p < 1.0:
            lo = sum(1 for j in range(m) if above + j * pv < top_p - TOP_P_TOL)
            hi = sum(1 for j in range(m) if above + j * pv < top_p + TOP_P_TOL)
            if v == top:
                lo, hi = max(lo, 1), max(hi, 1)     # the most likely token always has mass 0 before it
        else:
            lo = hi = m
        above += m * pv
        if min_p > 0.0:
            ratio = weight[v]                       # p_v / p_max: survivors' renormalisation cancels
            if ratio < min_p * (1 - MIN_P_TOL):
                lo = hi = 0
            elif ratio < min_p * (1 + MIN_P_TOL):
                lo = 0                              # on the threshold: either way
        bounds[v] = (lo, hi)
    return bounds


def run_shaping(scores: list, **settings_) -> torch.Tensor:
    config = DecodeConfig(strategy="sample", **settings_).validate()
    logits = torch.tensor([scores], dtype=torch.float32)
    before = logits.clone()
    shaped = shape(build_processors(config), torch.tensor([[0]]), logits)
    assert torch.equal(logits, before), "shape() modified its input"
    return shaped[0]


def check_shaped(scores, temperature, top_k, top_p, min_p):
    shaped = run_shaping(scores, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    values = scaled(scores, temperature)
    kept = torch.isfinite(shaped).numpy()
    # nothing but -inf is used to cut, and kept tokens keep their (temperature-scaled) score
    assert not torch.isnan(shaped).any()
    assert torch.all(torch.isfinite(shaped) | torch.isneginf(shaped))
    np.testing.assert_array_equal(shaped.numpy()[kept], values[kept])
    # at least one token, and a proper distribution
    assert kept.sum() >= 1
    probs = torch.softmax(shaped.double(), -1)
    assert abs(float(probs.sum()) - 1.0) < 1e-9
    assert float(torch.softmax(shaped, -1).sum()) == pytest.approx(1.0, abs=1e-5)
    assert torch.all(probs[~torch.from_numpy(kept)] == 0)
    # exactly the tokens the definitions give, counted per distinct score
    for v, (lo, hi) in level_bounds(values, top_k, top_p, min_p).items():
        n = int(((values == v) & kept).sum())
        assert lo <= n <= hi, (f"score {v}: kept {n} tokens, the definitions allow {lo}..{hi} "
                               f"(temperature={temperature}, top_k={top_k}, top_p={top_p}, min_p={min_p})")


@PROPS
@given(scores=scores_strategy, top_k=st.integers(min_value=1, max_value=60), temperature=temperature_strategy)
@example(scores=[1.0, 1.0, 1.0, 0.0], top_k=2, temperature=1.0)      # a tie at the k-th place keeps all three
@example(scores=[0.5], top_k=2, temperature=1.0)                      # k beyond the vocabulary
def test_top_k_keeps_every_token_scoring_at_least_the_kth(scores, top_k, temperature):
    check_shaped(scores, temperature, top_k, 1.0, 0.0)
    shaped = run_shaping(scores, temperature=temperature, top_k=top_k)
    ordered = sorted(scaled(scores, temperature).tolist(), reverse=True)
    kth = ordered[min(top_k, len(ordered)) - 1]
    expected = [v >= kth for v in scaled(scores, temperature).tolist()]
    assert torch.isfinite(shaped).tolist() == expected


@PROPS
@given(scores=scores_strategy, top_p=top_p_strategy, temperature=temperature_strategy)
@example(scores=[2.0, 1.0, 0.0, -1.0], top_p=0.5, temperature=1.0)
@example(scores=[0.0, 0.0, 0.0, 0.0], top_p=0.6, temperature=1.0)    # 4 equal tokens, p=0.6: 3 are kept
@example(scores=[5.0, 0.0], top_p=1e-9, temperature=1.0)              # tiny p still keeps the top token
def test_top_p_keeps_the_smallest_set_reaching_p(scores, top_p, temperature):
    check_shaped(scores, temperature, 0, top_p, 0.0)


def test_top_p_tie_example_by_hand():
    # four equal tokens of 0.25 each: reaching 0.6 takes three of them (0.75), whichever three
    shaped = run_shaping([0.0, 0.0, 0.0, 0.0], top_p=0.6)
    assert int(torch.isfinite(shaped).sum()) == 3
    # [0.5, 0.3, 0.2] with p=0.7: 0.5 is not enough, 0.5 + 0.3 is
    shaped = run_shaping([math.log(0.5), math.log(0.3), math.log(0.2)], top_p=0.7)
    assert torch.isfinite(shaped).tolist() == [True, True, False]


@PROPS
@given(scores=scores_strategy, min_p=min_p_strategy, temperature=temperature_strategy)
@example(scores=[0.0, math.log(0.5), math.log(0.05)], min_p=0.1, temperature=1.0)
@example(scores=[3.0, 3.0, -30.0], min_p=1.0, temperature=1.0)       # min_p 1 keeps the tied top tokens only
def test_min_p_keeps_tokens_above_a_fraction_of_the_top(scores, min_p, temperature):
    check_shaped(scores, temperature, 0, 1.0, min_p)


@PROPS
@given(scores=scores_strategy, temperature=temperature_strategy, top_k=top_k_strategy, top_p=top_p_strategy,
       min_p=min_p_strategy)
def test_chained_shaping_sums_to_one_and_keeps_the_defined_set(scores, temperature, top_k, top_p, min_p):
    check_shaped(scores, temperature, top_k, top_p, min_p)


@PROPS
@given(scores=scores_strategy, penalty=st.floats(min_value=0.1, max_value=5.0),
       seen=st.lists(st.integers(min_value=0, max_value=47), min_size=1, max_size=6))
def test_repetition_penalty_touches_only_tokens_in_the_context(scores, penalty, seen):
    seen = [i for i in seen if i < len(scores)]
    assume(seen)
    config = DecodeConfig(strategy="greedy", repetition_penalty=penalty).validate()
    shaped = shape(build_processors(config), torch.tensor([seen]), torch.tensor([scores], dtype=torch.float32))[0]
    for i, s in enumerate(np.asarray(scores, dtype=np.float32).tolist()):
        if i in seen:
            want = np.float32(s) / np.float32(penalty) if s > 0 else np.float32(s) * np.float32(penalty)
            assert float(shaped[i]) == pytest.approx(float(want), rel=1e-6, abs=1e-30)
        else:
            assert float(shaped[i]) == s


@PROPS
@given(scores=scores_strategy, temperature=temperature_strategy, top_k=top_k_strategy, top_p=top_p_strategy,
       strategy=st.sampled_from(["greedy", "beam"]))
def test_greedy_and_beam_ignore_the_sampling_knobs(scores, temperature, top_k, top_p, strategy):
    config = DecodeConfig(strategy=strategy, temperature=temperature, top_k=top_k, top_p=top_p).validate()
    logits = torch.tensor([scores], dtype=torch.float32)
    assert torch.equal(shape(build_processors(config), torch.tensor([[0]]), logits), logits)


# ---- trace JSON round trip -------------------------------------------------------
token_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["<b>", "</b>", "<br>", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "&amp;",
                     "$x$", "%{x}", "\\n", "\n", "\t", " ", "", "\u202eRTL", "你好", "😀", "<0xE4><0xBD>",
                     "<|im_start|>", '"quoted"', "\\u0000", "\x00", "\ud7ff", "\U0010ffff"]),
)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
share = st.floats(min_value=0.0, max_value=1.0)                       # probabilities and masses
logprob = st.one_of(st.floats(max_value=0.0, allow_nan=False, allow_infinity=False), st.just(float("-inf")))
count = st.integers(min_value=0, max_value=2**40)


@st.composite
def traces(draw):
    """Whole traces, consistent as the reader demands (see engine/trace_check.py), with arbitrary
    token texts and numbers: a decode (one sequence = the chosen tokens) or a beam search (a tree)."""
    vocab = draw(st.integers(min_value=1, max_value=MAX_VOCAB))       # a file may claim no more (engine.config)
    ident = st.integers(min_value=0, max_value=vocab - 1)
    beam = draw(st.booleans())
    num_beams = draw(st.integers(1, 8)) if beam else 1
    n_steps = draw(st.integers(1, 3))
    top_n = draw(st.integers(1, 4))

    def candidates():
        ids = draw(st.lists(ident, min_size=1, max_size=min(top_n + 1, vocab), unique=True))
        return [Candidate(token_id=i, text=draw(token_text), logit=draw(logprob), prob=draw(share),
                          logprob=draw(logprob), rank=r + 1 if r + 1 <= vocab else vocab, shaped_prob=draw(share),
                          kept=draw(st.booleans())) for r, i in enumerate(ids)]

    def neighbours():
        return [Neighbour(token_id=draw(ident), text=draw(token_text), value=draw(finite))
                for _ in range(draw(st.integers(0, 3)))]

    # the beam tree: a root, then 1..2*num_beams continuations per step of nodes one step earlier
    nodes, by_step = [], {-1: [0]}
    if beam:
        nodes.append(Node(id=0, parent=None, step=-1, token_id=-1, text="", logprob=0.0, cum_logprob=0.0, score=0.0,
                          length=0, status="root", beam=0, rank=0))
        for t in range(n_steps):
            for _ in range(draw(st.integers(1, 2 * num_beams))):
                node = Node(id=len(nodes), parent=draw(st.sampled_from(by_step[t - 1])), step=t,
                            token_id=draw(ident), text=draw(token_text), logprob=draw(logprob),
                            cum_logprob=draw(logprob), score=draw(logprob), length=t + 1,
                            status=draw(st.sampled_from(["kept", "pruned", "finished"])),
                            beam=draw(st.integers(0, num_beams - 1)), rank=draw(st.integers(1, 2 * num_beams)))
                nodes.append(node)
                by_step.setdefault(t, []).append(node.id)

    steps = []
    for index in range(n_steps):
        feedback = None
        if draw(st.booleans()):
            feedback = FeedBack(nearest=neighbours(), nearest_cosine=draw(finite), weights=neighbours(),
                                argmax_id=draw(ident), argmax_text=draw(token_text), entropy=draw(finite),
                                norm=draw(finite), nearest_norm=draw(finite))
        kv = None
        if draw(st.booleans()):
            kv = KVStep(rows=draw(count), bytes=draw(count), rows_appended=draw(count), rows_copied=draw(count),
                        paged_rows=draw(count), paged_blocks=draw(count), paged_bytes=draw(count),
                        beam_rows=draw(st.lists(count, max_size=num_beams)))
        texts = draw(st.lists(token_text, min_size=1, max_size=num_beams))
        running = draw(st.lists(st.sampled_from(by_step[index]), max_size=num_beams)) if beam else []
        steps.append(Step(index=index, candidates=candidates(), entropy=draw(st.floats(0, 20)),
                          shaped_entropy=draw(st.floats(0, 20)), removed_mass=draw(share),
                          kept_count=draw(st.integers(0, vocab)), chosen_ids=[draw(ident) for _ in texts],
                          chosen_texts=texts, feedback=feedback, kv=kv, beam_node_ids=running,
                          seconds=draw(st.floats(0, 1e6))))

    def path(node_id):
        by_id = {n.id: n for n in nodes}
        out, node = [], by_id[node_id]
        while node.parent is not None:
            out.append(node.token_id)
            node = by_id[node.parent]
        return out[::-1]

    if beam:
        leaves = draw(st.lists(st.sampled_from(range(1, len(nodes))), min_size=1, max_size=num_beams))
        sequences = [Sequence(token_ids=path(leaf), text=draw(token_text), cum_logprob=draw(logprob),
                              score=draw(logprob), node_id=leaf) for leaf in leaves]
    else:
        sequences = [Sequence(token_ids=[s.chosen_ids[0] for s in steps], text=draw(token_text),
                              cum_logprob=draw(logprob), score=draw(logprob))]
    config = DecodeConfig(strategy="beam" if beam else draw(st.sampled_from(["greedy", "sample", "soft", "gumbel"])),
                          temperature=draw(st.floats(min_value=1e-6, max_value=10)), top_k=draw(st.integers(0, 500)),
                          top_p=draw(st.floats(min_value=1e-6, max_value=1.0)), seed=draw(st.integers(0, 2**63 - 1)),
                          num_beams=num_beams, num_return_sequences=1, top_n=top_n,
                          max_new_tokens=draw(st.integers(n_steps, 1024)))
    return Trace(model=draw(token_text), prompt=draw(st.text(max_size=40)),
                 prompt_token_ids=draw(st.lists(ident, max_size=5)), config=config, steps=steps,
                 sequences=sequences, nodes=nodes,
                 model_facts={"name": draw(token_text), "vocab_size": vocab},
                 versions={"torch": draw(st.text(max_size=8))}, timings={"total_s": draw(finite)},
                 forced=draw(st.dictionaries(st.integers(0, config.max_new_tokens - 1), ident, max_size=3)))


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(trace=traces(), indent=st.sampled_from([None, 2]), as_bytes=st.booleans())
def test_trace_json_round_trips_for_arbitrary_token_texts(trace, indent, as_bytes):
    text = trace.to_json(indent=indent)
    back = Trace.from_json(text.encode("utf-8") if as_bytes else text)
    assert back == trace
    # every token text survives character for character
    for step, step_back in zip(trace.steps, back.steps):
        assert [c.text for c in step.candidates] == [c.text for c in step_back.candidates]
        assert step.chosen_texts == step_back.chosen_texts
    assert [n.text for n in trace.nodes] == [n.text for n in back.nodes]
    # and a second trip gives the same bytes
    assert back.to_json(indent=indent) == text
