"""engine.soft_inputs on tiny models: each rule against greedy, sampling, p^T E or a hand computation."""
from __future__ import annotations

import math

import pytest
import torch

from tiny_models import tiny_gemma3
from engine import ConfigError, DecodeConfig, Trace, decode, make_runner
from engine.samplers.shaping import build_processors, shape
from engine.soft_inputs.lanes import SoftLanes
from engine.soft_inputs.probes import js_divergence, probe
from engine.soft_inputs.rules import (ColdStop, cold_entropy, mixture_vector, moi_weights, multi_token_mean,
                                      multiply_adds, participation, soft_thinking)
from engine.soft_inputs.scores import distinct_n, longest_repeat, score
from engine.speculative.proof import fit

PROMPT = "The capital of France is"
RULES = ("soft-thinking", "mixture-of-inputs", "hidden-state", "multi-token-mean")


@pytest.fixture(scope="module")
def gemma3():
    return tiny_gemma3()


def stepped(lm, config):
    """(trace, per step the full raw logits, the runner): the logits as each forward pass gave them."""
    runner = make_runner(lm, PROMPT, config)
    logits, forward = [], runner.forward

    def recording(**inputs):
        fwd = forward(**inputs)
        logits.append(fwd.logits[0].clone())
        return fwd

    runner.forward = recording
    return runner.run(), logits, runner


def scaled_row(lm, token):
    scale = 1.0 if lm.embed_scale is None else float(lm.embed_scale)
    return lm.embeddings[token].float() * scale


# ---- Soft Thinking ------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["llama", "gemma3"])
@pytest.mark.parametrize("chain", [{}, {"temperature": 0.7, "top_p": 0.9, "min_p": 0.05, "top_k": 30}])
def test_soft_thinking_with_one_token_is_greedy(llama, gemma3, which, chain):
    """max_topk 1: the same ids as greedy, the fed vector the (scaled) embedding row of the greedy id, and the
    same logits at every step (the chain never drops the argmax)."""
    lm = llama if which == "llama" else gemma3
    greedy, greedy_logits, _ = stepped(lm, DecodeConfig(strategy="greedy", max_new_tokens=10))
    soft, soft_logits, runner = stepped(lm, DecodeConfig(strategy="soft-thinking", soft_top_k=1, max_new_tokens=10,
                                                         **chain))
    ids = [s.chosen_ids[0] for s in greedy.steps]
    assert [s.emitted_id for s in soft.steps] == ids
    assert [s.fed_ids for s in soft.steps] == [[i] for i in ids]
    assert all(s.fed_weights == [1.0] for s in soft.steps)
    for token, vector in zip(ids, runner.fed_vectors):
        assert torch.equal(vector, scaled_row(lm, token))
    for a, b in zip(greedy_logits, soft_logits, strict=True):
        assert torch.equal(a, b)


def toy_chain(config, probs):
    """The chain of `config` on logits whose softmax at that temperature is `probs`."""
    logits = torch.log(torch.tensor(probs)) * config.temperature
    shaped = shape(build_processors(config), torch.tensor([[0]]), logits[None])[0]
    return torch.softmax(shaped, dim=-1)


TOY_E = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0],
                      [1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0]])
TOY_P = [0.4, 0.3, 0.2, 0.1, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("settings,expected", [
    # top-k 3 renormalises to [4/9, 3/9, 2/9]; top-p 0.75 on that keeps 2 tokens: [4/7, 3/7]
    ({"top_k": 3, "top_p": 0.75}, {0: 4 / 7, 1: 3 / 7}),
    # top-p 0.75 on the raw p keeps 3 tokens (so top-p before top-k would keep 3 as well)
    ({"top_p": 0.75}, {0: 0.4 / 0.9, 1: 0.3 / 0.9, 2: 0.2 / 0.9}),
    # min-p 0.8 after top-k 3 and top-p 0.75: 3/7 < 0.8 * 4/7, only token 0 is left
    ({"top_k": 3, "top_p": 0.75, "min_p": 0.8}, {0: 1.0}),
    # no truncation in the chain, max_topk 2: the top two of p, renormalised
    ({"soft_top_k": 2}, {0: 4 / 7, 1: 3 / 7}),
    # min-p 0.3 alone drops 0.1 (< 0.12), keeps [0.4, 0.3, 0.2] / 0.9
    ({"min_p": 0.3}, {0: 0.4 / 0.9, 1: 0.3 / 0.9, 2: 0.2 / 0.9}),
])
def test_the_fed_vector_by_hand_on_a_toy_table(settings, expected):
    """V = 8, d = 4, temperature 2: the chain (each stage renormalised, top-k before top-p), the top max_topk
    renormalised, sum w_i E[i]; weights and vector against fractions worked out by hand."""
    config = DecodeConfig(strategy="soft-thinking", temperature=2.0, **settings)
    fed = soft_thinking(toy_chain(config, TOY_P), config.soft_top_k, torch.Generator().manual_seed(0))
    assert fed.ids.tolist() == list(expected)
    assert fed.weights.tolist() == pytest.approx(list(expected.values()), abs=1e-6)
    by_hand = sum(w * TOY_E[i] for i, w in expected.items())
    assert torch.allclose(mixture_vector(TOY_E, fed), by_hand, atol=1e-6)
    assert fed.emitted == 0
    assert participation(fed.weights) == pytest.approx(1 / sum(w * w for w in expected.values()), rel=1e-5)


def test_a_mixture_of_most_of_the_vocabulary_is_one_product_over_all_of_e():
    from engine.soft_inputs.rules import DENSE_FROM, Fed

    g = torch.Generator().manual_seed(1)
    E = torch.randn(DENSE_FROM + 500, 8, generator=g)
    probs = torch.softmax(torch.randn(len(E), generator=g), -1)
    fed = soft_thinking(probs, len(E), g)
    assert len(fed.ids) > DENSE_FROM
    assert torch.allclose(mixture_vector(E, fed), probs @ E, atol=1e-6)
    few = Fed(fed.ids[:50], fed.weights[:50] / fed.weights[:50].sum(), int(fed.ids[0]), "mixture")
    assert torch.allclose(mixture_vector(E, few), few.weights @ E[few.ids], atol=1e-6)


def test_without_truncation_soft_thinking_is_the_expected_embedding_lane(llama):
    """max_topk = V with no chain truncation feeds p^T E: the same ids, fed vectors and logits as the soft
    strategy (to float rounding: the sums run in another order)."""
    V = llama.facts.vocab_size
    common = dict(max_new_tokens=8, temperature=0.8)
    soft, soft_logits, soft_runner = stepped(llama, DecodeConfig(strategy="soft", **common))
    thinking, logits, runner = stepped(llama, DecodeConfig(strategy="soft-thinking", soft_top_k=V, **common))
    assert [s.emitted_id for s in thinking.steps] == [s.feedback.argmax_id for s in soft.steps]
    soft_vectors = [value[0, 0] for kind, value in soft_runner._inputs[1:]] + [soft_runner.next_input[1][0, 0]]
    for a, b in zip(soft_vectors, runner.fed_vectors, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    for a, b in zip(soft_logits, logits, strict=True):
        assert torch.allclose(a, b, atol=1e-4)
    assert thinking.steps[0].fed.participation == pytest.approx(
        1 / float((torch.softmax(soft_logits[0] / 0.8, -1) ** 2).sum()), rel=1e-4)


def test_cold_stop_fires_exactly_at_the_lth_low_step():
    stop = ColdStop(0.01, 3)
    entropies = [0.5, 0.005, 0.005, 0.2, 0.005, 0.005, 0.005, 0.005, 0.005]
    fired = [stop.update(h) for h in entropies]
    assert fired == [False, False, False, False, False, False, True, False, False]
    assert stop.stopped


def test_cold_stop_reads_the_entropy_of_the_temperature_scaled_untruncated_p():
    logits = torch.tensor([math.log(6.0), math.log(3.0), 0.0, -math.inf])
    # T = 1: p = [0.6, 0.3, 0.1, 0]
    assert cold_entropy(logits, 1.0) == pytest.approx(-(0.6 * math.log(0.6) + 0.3 * math.log(0.3)
                                                        + 0.1 * math.log(0.1)), rel=1e-6)
    # T = 0.5 squares the odds: p proportional to [36, 9, 1]
    q = [36 / 46, 9 / 46, 1 / 46]
    assert cold_entropy(logits, 0.5) == pytest.approx(-sum(x * math.log(x) for x in q), rel=1e-6)


def test_cold_stop_in_a_decode_switches_to_ids_at_the_lth_step(llama):
    """With a threshold above every entropy each step is low: the L-th step fires and feeds its emitted id,
    the earlier ones feed mixtures, the later ones sampled ids."""
    L = 3
    trace = decode(llama, PROMPT, DecodeConfig(strategy="soft-thinking", max_new_tokens=7, cold_stop=f"20:{L}"))
    kinds = [s.fed.kind for s in trace.steps]
    assert kinds == ["mixture"] * (L - 1) + ["id"] * (7 - L + 1)
    assert [s.fed.cold_stop for s in trace.steps] == [i == L - 1 for i in range(7)]
    assert [s.fed.low_steps for s in trace.steps[:L]] == list(range(1, L + 1))
    entropies = [s.fed.entropy for s in trace.steps]
    assert all(h < 20 for h in entropies)
    # the fired step fed the argmax of its mixture, which is the greedy token of that step
    fired = trace.steps[L - 1]
    assert fired.fed_ids == [fired.emitted_id] == [max(fired.candidates, key=lambda c: c.logit).token_id]
    # a threshold of 0 never fires
    never = decode(llama, PROMPT, DecodeConfig(strategy="soft-thinking", max_new_tokens=5, cold_stop="0:1"))
    assert not any(s.fed.cold_stop for s in never.steps) and all(s.fed.kind == "mixture" for s in never.steps)


@pytest.mark.parametrize("tau", [0.5, 1.0])
def test_gumbel_soft_thinkings_first_emitted_id_follows_the_truncated_p(llama, tau):
    """The first emitted id of 300 seeded decodes against the chain's p truncated to max_topk and renormalised:
    Pearson's chi-square p-value above 0.001 (Gumbel-max: the argmax of log w + g is a sample from w)."""
    config = DecodeConfig(strategy="soft-thinking", max_new_tokens=1, temperature=1.5, top_k=20, soft_top_k=6,
                          soft_gumbel=tau)
    _, logits, _ = stepped(llama, DecodeConfig(max_new_tokens=1))
    p = torch.softmax(logits[0] / 1.5, -1)          # top-k 20 keeps the top 6 and their ratios
    top = torch.topk(p, 6)
    w = torch.zeros_like(p)
    w[top.indices] = top.values / top.values.sum()
    counts = torch.zeros_like(p)
    for seed in range(300):
        counts[decode(llama, PROMPT, config.replace(seed=seed)).steps[0].emitted_id] += 1
    assert counts[w == 0].sum() == 0
    result = fit(counts[w > 0], w[w > 0])
    assert result.p_value > 0.001, result
    assert (counts > 0).sum() >= 3            # not greedy: several tokens come out


def test_dirichlet_with_a_huge_concentration_keeps_the_weights():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    plain = soft_thinking(probs, 4, torch.Generator().manual_seed(0))
    noisy = soft_thinking(probs, 4, torch.Generator().manual_seed(0), dirichlet_alpha=1e6)
    assert noisy.ids.tolist() == plain.ids.tolist()
    assert torch.allclose(noisy.weights, plain.weights, atol=1e-2)
    rough = soft_thinking(probs, 4, torch.Generator().manual_seed(0), dirichlet_alpha=1.0)
    assert not torch.allclose(rough.weights, plain.weights, atol=1e-2)


# ---- Mixture of Inputs ---------------------------------------------------------------------------
def test_moi_with_infinite_beta_is_plain_sampling(llama):
    sample, sample_logits, _ = stepped(llama, DecodeConfig(strategy="sample", max_new_tokens=10, seed=7,
                                                          temperature=1.3))
    moi, moi_logits, runner = stepped(llama, DecodeConfig(strategy="mixture-of-inputs", max_new_tokens=10, seed=7,
                                                          temperature=1.3, moi_beta=math.inf))
    ids = [s.chosen_ids[0] for s in sample.steps]
    assert [s.emitted_id for s in moi.steps] == ids
    assert [s.fed_ids for s in moi.steps] == [[i] for i in ids]
    for token, vector in zip(ids, runner.fed_vectors):
        assert torch.equal(vector, scaled_row(llama, token))
    for a, b in zip(sample_logits, moi_logits, strict=True):
        assert torch.equal(a, b)


def moi_code_form(E, logits, y, beta, k=20):
    """The released code: H_n * sum_i ((prior + beta * 1[y]) / (1 + beta))_i e_i + (1 - H_n) * e_y, over the top-k
    candidates and y."""
    top = torch.topk(logits, k)
    cand = top.indices.tolist()
    prior = torch.softmax(top.values.double(), -1)
    hn = float(-(prior * prior.log()).sum()) / math.log(k)
    if y not in cand:
        cand.append(y)
        prior = torch.cat([prior, torch.zeros(1, dtype=torch.float64)])
    indicator = torch.tensor([1.0 if c == y else 0.0 for c in cand], dtype=torch.float64)
    inner = ((prior + beta * indicator) / (1 + beta)) @ E[cand].double()
    return hn * inner + (1 - hn) * E[y].double()


def test_moi_weights_equal_the_released_code_form():
    g = torch.Generator().manual_seed(3)
    E = torch.randn(60, 8, generator=g)
    for case in range(300):
        logits = torch.randn(60, generator=g) * float(torch.rand(1, generator=g) * 6)
        y = int(torch.randint(0, 60, (1,), generator=g))        # inside or outside the top 20
        beta = [0.0, 0.5, 1.0, 2.0, 37.0][case % 5]
        fed = moi_weights(logits, y, beta)
        assert fed.emitted == y and float(fed.weights.sum()) == pytest.approx(1.0, abs=1e-6)
        assert bool((fed.weights >= 0).all()) and fed.weights.tolist() == sorted(fed.weights.tolist(), reverse=True)
        assert torch.allclose(mixture_vector(E, fed).double(), moi_code_form(E, logits, y, beta), atol=1e-5)


def test_moi_limits():
    # a one-hot prior has H_n = 0: e_y whatever beta
    logits = torch.full((30,), -1e4)
    logits[4] = 10.0
    for beta in (0.0, 1.0, 5.0):
        fed = moi_weights(logits, 4, beta)
        assert fed.ids.tolist()[0] == 4 and float(fed.weights[0]) == pytest.approx(1.0, abs=1e-6)
    # beta 0 and a uniform prior over the top 20: H_n = 1, w = p
    flat = torch.zeros(20)
    fed = moi_weights(flat, 3, 0.0)
    assert sorted(fed.ids.tolist()) == list(range(20))
    assert torch.allclose(fed.weights, torch.full((20,), 1 / 20), atol=1e-6)


# ---- the multi-token mean and the hidden state ---------------------------------------------------
def test_multi_token_mean_with_one_draw_feeds_the_sampled_ids_embedding(llama, gemma3):
    for lm in (llama, gemma3):
        sample = decode(lm, PROMPT, DecodeConfig(strategy="sample", max_new_tokens=8, seed=5))
        mean, _, runner = stepped(lm, DecodeConfig(strategy="multi-token-mean", mtm_k=1, max_new_tokens=8, seed=5))
        ids = [s.chosen_ids[0] for s in sample.steps]
        assert [s.emitted_id for s in mean.steps] == ids
        for token, vector in zip(ids, runner.fed_vectors):
            assert torch.equal(vector, scaled_row(lm, token))


def test_the_mean_of_many_draws_tends_to_the_expected_embedding():
    g = torch.Generator().manual_seed(0)
    E = torch.randn(40, 6, generator=g)
    q = torch.softmax(torch.randn(40, generator=g), -1)
    fed = multi_token_mean(q, 4096, g)
    assert float(fed.weights.sum()) == pytest.approx(1.0)
    assert torch.allclose(mixture_vector(E, fed), q @ E, atol=0.06)


def test_the_hidden_state_is_fed_as_is_and_its_dot_product_picks_the_greedy_token(llama):
    """On a tied model the logits are h . E^T, so the token nearest the fed hidden state by dot product is the
    greedy one; the fed vector is the final hidden state of a plain forward pass over the same inputs."""
    trace, logits, runner = stepped(llama, DecodeConfig(strategy="hidden-state", max_new_tokens=5))
    greedy = decode(llama, PROMPT, DecodeConfig(max_new_tokens=1))
    assert trace.steps[0].emitted_id == greedy.steps[0].chosen_ids[0]
    assert llama.model.config.tie_word_embeddings
    for step, h in zip(trace.steps, runner.fed_vectors):
        assert int((llama.embeddings @ h).argmax()) == step.emitted_id
        assert step.fed_ids == [] and step.fed.kind == "hidden" and math.isnan(step.fed.participation)
    ids = torch.tensor([trace.prompt_token_ids])
    out = llama.model(input_ids=ids, output_hidden_states=True)
    assert torch.allclose(runner.fed_vectors[0], out.hidden_states[-1][0, -1], atol=1e-5)


# ---- every lane ----------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", RULES)
def test_every_rule_keeps_one_kv_row_per_step(llama, gemma3, strategy):
    for lm in (llama, gemma3):
        greedy = decode(lm, PROMPT, DecodeConfig(max_new_tokens=6))
        trace = decode(lm, PROMPT, DecodeConfig(strategy=strategy, max_new_tokens=6))
        P = len(trace.prompt_token_ids)
        assert [s.kv.rows for s in trace.steps] == [P + i for i in range(6)] == [s.kv.rows for s in greedy.steps]
        assert [s.kv.rows_appended for s in trace.steps] == [P] + [1] * 5
        assert [s.kv.bytes for s in trace.steps] == [s.kv.bytes for s in greedy.steps]


@pytest.mark.parametrize("batched", [True, False])
def test_lanes_step_in_turn_and_stop_keeps_what_ran(llama, gemma3, batched):
    configs = [DecodeConfig(max_new_tokens=6)] + [DecodeConfig(strategy=s, max_new_tokens=6) for s in RULES]
    seen = []

    def on_step(lane, step):
        seen.append((lane, step.index))
        return len(seen) < 12 if not batched else len(seen) < 10     # a batch stops after its whole step

    lanes = SoftLanes(llama, PROMPT, configs, batched=batched)
    lanes.run(on_step)
    runs = lanes.results()
    assert seen[:5] == [(i, 0) for i in range(5)] and seen[5:10] == [(i, 1) for i in range(5)]
    assert [len(r.trace.steps) for r in runs] == ([3, 3, 2, 2, 2] if not batched else [2] * 5)
    assert all(len(r.vectors) == len(r.trace.steps) for r in runs)
    for lm in (llama, gemma3):
        full = SoftLanes(lm, PROMPT, configs, batched=batched).run()
        for lane, config in zip(full, configs):
            alone, _, runner = stepped(lm, config)
            assert [s.chosen_ids for s in lane.trace.steps] == [s.chosen_ids for s in alone.steps]
            assert [s.fed_ids for s in lane.trace.steps] == [s.fed_ids for s in alone.steps]
            assert [s.kv.rows for s in lane.trace.steps] == [s.kv.rows for s in alone.steps]
            for a, b in zip(lane.vectors, runner.fed_vectors if config.strategy != "greedy" else lane.vectors):
                assert torch.allclose(a, b, atol=1e-4)


# ---- probes ------------------------------------------------------------------------------------------
def test_js_divergence_by_hand():
    assert js_divergence(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == pytest.approx(math.log(2))
    p, q = torch.tensor([0.5, 0.5, 0.0]), torch.tensor([0.25, 0.25, 0.5])
    m = [0.375, 0.375, 0.25]
    h = lambda x: -sum(v * math.log(v) for v in x if v > 0)        # noqa: E731
    assert js_divergence(p, q) == pytest.approx(h(m) - (h([0.5, 0.5]) + h([0.25, 0.25, 0.5])) / 2, rel=1e-9)
    assert js_divergence(p, p) == 0.0


@pytest.mark.parametrize("which", ["llama", "gemma3"])
def test_probes_are_zero_for_a_one_hot_input(llama, gemma3, which):
    lm = llama if which == "llama" else gemma3
    run = SoftLanes(lm, PROMPT, [DecodeConfig(strategy="soft-thinking", soft_top_k=1, max_new_tokens=4)]).run()[0]
    for index in range(4):
        result = probe(lm, run.trace, run.vectors, index)
        assert result.js_top1 == pytest.approx(0.0, abs=1e-6) and result.gap == pytest.approx(0.0, abs=1e-6)
        assert result.top1.token_id == run.trace.steps[index].emitted_id and result.top1.value == 1.0
        assert result.js_top2 > 1e-4 and result.gap_tokens == 1


def test_probe_of_a_mixture_against_plain_forward_passes(llama):
    """The probe's JS(top-1) and gap recomputed with separate, unbatched forward passes over the same inputs."""
    run = SoftLanes(llama, PROMPT, [DecodeConfig(strategy="soft-thinking", soft_top_k=4, max_new_tokens=4)]).run()[0]
    index = 2
    result = probe(llama, run.trace, run.vectors, index)
    step = run.trace.steps[index]
    layer = llama.model.get_input_embeddings()
    prefix = torch.cat([layer(torch.tensor([run.trace.prompt_token_ids]))[0], torch.stack(run.vectors[:index])])

    def next_p(last):
        return torch.softmax(llama.model(inputs_embeds=torch.cat([prefix, last[None]])[None]).logits[0, -1], -1)

    E = llama.embeddings
    after_v = next_p(run.vectors[index])
    assert result.js_top1 == pytest.approx(js_divergence(after_v, next_p(E[step.fed_ids[0]])), abs=1e-5)
    w = torch.tensor(step.fed_weights[:4])
    w = w / w.sum()
    marginal = sum(w[j] * next_p(E[i]) for j, i in enumerate(step.fed_ids[:4]))
    assert float(marginal.sum()) == pytest.approx(1.0, abs=1e-5)
    assert result.gap == pytest.approx(js_divergence(next_p(w @ E[step.fed_ids[:4]]), marginal), abs=1e-5)
    assert result.gap_tokens == 4 and result.gap > 0


# ---- after a run ---------------------------------------------------------------------------------
def test_rescored_greedy_lane_reproduces_its_recorded_logprobs(llama):
    trace, _, runner = stepped(llama, DecodeConfig(max_new_tokens=10))
    scored = score(llama, trace)
    assert scored.logprobs == pytest.approx(runner.logprobs, abs=1e-4)
    assert scored.perplexity == pytest.approx(math.exp(-sum(runner.logprobs) / 10), rel=1e-4)


def test_repetition_measures_by_hand():
    assert distinct_n([1, 2, 1, 2, 1], 2) == pytest.approx(2 / 4)
    assert distinct_n([1, 2, 3], 2) == 1.0 and math.isnan(distinct_n([1], 2))
    assert longest_repeat([5, 1, 2, 3, 9, 1, 2, 3, 7]) == (3, (1, 2, 3))
    assert longest_repeat([4, 4, 4, 4]) == (3, (4, 4, 4))      # overlapping occurrences count
    assert longest_repeat([1, 2, 3]) == (0, ())


def test_cost_counts_from_the_models_shapes(llama):
    V, d = llama.model.config.vocab_size, llama.model.config.hidden_size
    assert multiply_adds("soft", V, d) == V * d == multiply_adds("gumbel", V, d)
    assert multiply_adds("soft-thinking", V, d, soft_top_k=10) == 10 * d
    assert multiply_adds("mixture-of-inputs", V, d) == 21 * d
    assert multiply_adds("multi-token-mean", V, d, mtm_k=4) == 4 * d
    assert multiply_adds("greedy", V, d) == 0 == multiply_adds("hidden-state", V, d)
    trace = decode(llama, PROMPT, DecodeConfig(strategy="soft-thinking", soft_top_k=7, max_new_tokens=3))
    assert score(llama, trace).multiply_adds == 7 * d


# ---- settings and traces -------------------------------------------------------------------------
@pytest.mark.parametrize("changes,named", [
    ({"soft_top_k": 0}, "soft_top_k"), ({"cold_stop": "0.1"}, "cold_stop: '0.1' is not TAU:L"),
    ({"cold_stop": "x:4"}, "is not TAU:L"), ({"cold_stop": "0.1:0"}, "L must be between"),
    ({"cold_stop": "-1:4"}, "threshold TAU"), ({"soft_gumbel": -0.5}, "soft_gumbel"),
    ({"moi_beta": -1.0}, "moi_beta"), ({"moi_beta": math.nan}, "moi_beta"), ({"mtm_k": 5000}, "mtm_k"),
    ({"soft_dirichlet": 1e-9}, "soft_dirichlet"), ({"sampler_order": "vllm"}, "transformers order"),
])
def test_bad_settings_name_what_was_wrong(changes, named):
    with pytest.raises(ConfigError, match=named):
        DecodeConfig(strategy="soft-thinking", **changes).validate()


def test_a_plain_decoder_refuses_a_rule_it_cannot_run(llama):
    from engine.decoding.decoder import Decoder
    from engine.decoding.lanes import LaneBatch

    with pytest.raises(ConfigError, match="SoftInputDecoder"):
        Decoder(llama, PROMPT, DecodeConfig(strategy="soft-thinking"))
    with pytest.raises(ConfigError, match="SoftInputDecoder"):
        LaneBatch(llama, PROMPT, [DecodeConfig(strategy="hidden-state")])


@pytest.mark.parametrize("strategy", RULES)
def test_traces_read_back_whole(llama, strategy):
    config = DecodeConfig(strategy=strategy, max_new_tokens=5, moi_beta=math.inf, cold_stop="20:2")
    trace = decode(llama, PROMPT, config)
    again = Trace.from_json(trace.to_json())
    assert again.config == config
    for a, b in zip(trace.steps, again.steps):
        assert (a.fed_ids, a.fed_weights, a.emitted_id) == (b.fed_ids, b.fed_weights, b.emitted_id)
        assert a.fed.kind == b.fed.kind and a.fed.nearest == b.fed.nearest and a.fed.cold_stop == b.fed.cold_stop


@pytest.mark.parametrize("strategy", RULES)
def test_a_branch_forces_its_token_and_feeds_it_as_an_id(llama, strategy):
    config = DecodeConfig(strategy=strategy, max_new_tokens=5, seed=2)
    runner = make_runner(llama, PROMPT, config)
    trace = runner.run()
    token = trace.steps[2].candidates[3].token_id
    branch = runner.fork(2, token).run()
    assert [s.chosen_ids for s in branch.steps[:2]] == [s.chosen_ids for s in trace.steps[:2]]
    forced = branch.steps[2]
    assert forced.emitted_id == token and forced.fed_ids == [token] and forced.fed.kind == "id"
    assert runner.copy() is None
