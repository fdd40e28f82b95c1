"""Speculative decoding against independent references: transformers' own greedy and assisted `generate`,
the chi-square test of many seeded draws against the target's p, and the acceptance test recomputed from the
recorded numbers. Target: the tiny Llama; draft model: a tiny GPT-2 with the same tokenizer."""
from __future__ import annotations

import pytest
import torch

from tiny_models import tiny_gpt2, tiny_llama
from engine import ConfigError, DecodeConfig, Trace, decode
from engine.speculative.proof import RULES, draw_next, draw_plain, first_position, fit, histogram
from engine.speculative.verify import expected_tokens_per_round, overlap

PROMPT = "The capital of France is Paris. The capital of Italy is"
PENALTY = 1.3           # without it the tiny model repeats one token and every draft is trivially right
N = 24
SIGNIFICANCE = 0.001
SEEDS = 300    # a fit with a p-value below this is called "not p"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on one thread: two threads on a shared 2-core machine wait on each other (15x slower here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def target():
    return tiny_llama()


@pytest.fixture(scope="module")
def far_draft():
    return tiny_gpt2(seed=5)


@pytest.fixture(scope="module")
def close_draft():
    """The target's own weights with its logits flattened by a fifth: q close to p, not equal."""
    lm = tiny_llama()
    with torch.no_grad():
        lm.model.model.norm.weight.mul_(0.8)
    return lm


def generate_ids(lm, prompt_ids, **kwargs):
    out = lm.model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                            pad_token_id=0, eos_token_id=list(lm.eos_token_ids), do_sample=False, max_new_tokens=N,
                            repetition_penalty=PENALTY, **kwargs)
    ids = out[0, len(prompt_ids):].tolist()
    ends = [i for i, t in enumerate(ids) if t in lm.eos_token_ids]
    return ids[:ends[0] + 1] if ends else ids


def speculative(lm, draft, k, draft_lm=None, **changes):
    config = DecodeConfig(strategy="speculative", draft=draft, draft_tokens=k, max_new_tokens=N,
                          repetition_penalty=PENALTY, **changes)
    return decode(lm, PROMPT, config, draft_lm=draft_lm)


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_is_plain_greedy_and_transformers_assisted(target, far_draft, k):
    plain = decode(target, PROMPT, DecodeConfig(max_new_tokens=N, repetition_penalty=PENALTY))
    prompt_ids = plain.prompt_token_ids
    assert plain.best.token_ids == generate_ids(target, prompt_ids)
    references = {"early-exit:1": generate_ids(target, prompt_ids, assistant_early_exit=1),
                  "prompt-lookup:2": generate_ids(target, prompt_ids, prompt_lookup_num_tokens=k),
                  "model:tiny-gpt2": generate_ids(target, prompt_ids, assistant_model=far_draft.model,
                                                  num_assistant_tokens=k, num_assistant_tokens_schedule="constant")}
    for spec, reference in references.items():
        trace = speculative(target, spec, k, draft_lm=far_draft)
        assert trace.best.token_ids == reference == plain.best.token_ids, spec
        assert all(len(r.drafts) <= k for r in trace.rounds)
        assert trace.timings["target_passes"] == len(trace.rounds) <= len(plain.steps)


def test_a_round_keeps_what_the_target_would_pick(target, far_draft):
    """Greedy: every kept draft is the target's top token there, a rejected one is not, and the corrected token
    is; the steps' candidates are the target's own (rank 1 = chosen)."""
    trace = speculative(target, "model:tiny-gpt2", 4, draft_lm=far_draft)
    assert any(d.status == "rejected" for r in trace.rounds for d in r.drafts)
    for rnd in trace.rounds:
        for draft in rnd.drafts:
            if draft.status == "unchecked":
                continue
            top = max(draft.candidates, key=lambda c: c.p)
            assert (top.token_id == draft.token_id) == (draft.status == "kept")
    for step in trace.steps:
        assert step.chosen_ids[0] == max(step.candidates, key=lambda c: c.shaped_prob).token_id


def test_the_trace_round_trips_and_counts_add_up(target, far_draft):
    trace = speculative(target, "model:tiny-gpt2", 3, draft_lm=far_draft, verify="sample", temperature=1.4, seed=3)
    again = Trace.from_json(trace.to_json())
    assert again.rounds == trace.rounds and again.best.token_ids == trace.best.token_ids
    assert sum(len(r.emitted_ids) for r in trace.rounds) == len(trace.steps)
    assert trace.timings["draft_passes"] == sum(r.draft_passes for r in trace.rounds)


@pytest.mark.parametrize("which", ["far", "close"])
def test_seeded_speculative_draws_follow_p(target, far_draft, close_draft, which):
    """The first token of many seeded speculative decodes (one draft, then the check) against the target's p:
    Pearson's chi-square p-value above 0.001, and each recorded decision equals u <= p/q recomputed."""
    draft_lm = far_draft if which == "far" else close_draft
    config = DecodeConfig(strategy="speculative", draft="model:draft", draft_tokens=1, max_new_tokens=2,
                          verify="sample", temperature=1.5, top_k=8)
    p, q = first_position(target, PROMPT, config, draft_lm)
    counts, decided = torch.zeros_like(p), 0
    for seed in range(SEEDS):
        trace = decode(target, PROMPT, config.replace(seed=seed), draft_lm=draft_lm)
        counts[trace.steps[0].chosen_ids[0]] += 1
        for rnd in trace.rounds:
            for d in rnd.drafts:
                if d.status != "unchecked":
                    assert (d.u <= d.p / d.q) == (d.status == "kept")
                    decided += 1
    assert decided >= SEEDS
    result = fit(counts, p)
    assert result.p_value > SIGNIFICANCE, result
    assert overlap(p, q) < 1 - (0.3 if which == "far" else 0.02)      # the drafts are really unlike p


@pytest.mark.parametrize("which", ["far", "close"])
def test_the_common_slip_leaves_p_and_ids_alone_keep_fewer(target, far_draft, close_draft, which):
    """Batched draws of the same rule: exact follows p; drawing a rejection from p itself does not; taking q
    one-hot on the drafted id still follows p but keeps sum q p of the drafts instead of sum min(p, q)."""
    draft_lm = far_draft if which == "far" else close_draft
    config = DecodeConfig(strategy="speculative", draft="model:draft", draft_tokens=1, verify="sample",
                          temperature=1.5, top_k=12)
    p, q = first_position(target, PROMPT, config, draft_lm)
    generator = torch.Generator().manual_seed(11)
    n = 40_000
    results = {}
    for rule in RULES:
        tokens, kept = draw_next(p, q, n, generator, rule)
        results[rule] = (fit(histogram(tokens, p.shape[0]), p), float(kept.float().mean()))
    plain = fit(histogram(draw_plain(p, n, generator), p.shape[0]), p)
    assert plain.p_value > SIGNIFICANCE and results["exact"][0].p_value > SIGNIFICANCE
    assert results["residual_is_p"][0].p_value < 1e-6
    assert results["ids_only"][0].p_value > SIGNIFICANCE
    alpha, alpha_ids = overlap(p, q), float((p * q).sum())
    assert abs(results["exact"][1] - alpha) < 0.02 and abs(results["ids_only"][1] - alpha_ids) < 0.02
    assert alpha_ids < alpha


def test_the_chi_square_p_value_matches_the_closed_form():
    """For 2 degrees of freedom the chi-square survival function is exp(-x / 2); for 1 it is erfc(sqrt(x / 2))."""
    import math

    p = torch.tensor([0.5, 0.3, 0.2])
    counts = torch.tensor([560.0, 270.0, 170.0])
    chi2 = (60 ** 2 / 500 + 30 ** 2 / 300 + 30 ** 2 / 200)
    assert fit(counts, p).p_value == pytest.approx(math.exp(-chi2 / 2), rel=1e-5)
    two = fit(torch.tensor([530.0, 470.0]), torch.tensor([0.5, 0.5]))
    assert two.p_value == pytest.approx(math.erfc(math.sqrt(two.chi2 / 2)), rel=1e-5)


def test_expected_tokens_per_round():
    assert expected_tokens_per_round(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens_per_round(0.0, 4) == 1.0 and expected_tokens_per_round(1.0, 4) == 5.0


@pytest.mark.parametrize("changes,named", [
    ({"draft_tokens": 0}, "draft_tokens"),
    ({"draft": "early-exit:2"}, "layers, so choose 1 to 1"),
    ({"draft": "early-exit:0"}, "at least 1 layer"),
    ({"draft": "lookahead:3"}, "is not a draft"),
    ({"verify": "beam"}, "verify"),
])
def test_bad_settings_name_what_was_wrong(target, changes, named):
    config = DecodeConfig(strategy="speculative", **{"draft": "early-exit:1", "draft_tokens": 2, **changes})
    with pytest.raises(ConfigError, match=named):
        decode(target, PROMPT, config)


@pytest.mark.parametrize("strategy", ["beam", "soft", "gumbel", "greedy"])
def test_a_draft_with_another_strategy_is_refused(strategy):
    with pytest.raises(ConfigError, match="use the strategy speculative"):
        DecodeConfig(strategy=strategy, draft="early-exit:1").validate()


def test_a_draft_with_another_vocabulary_is_refused(target):
    other = tiny_llama(vocab_size=320)
    with pytest.raises(ConfigError, match="share the target's vocabulary"):
        decode(target, PROMPT, DecodeConfig(strategy="speculative", draft="model:x"), draft_lm=other)


def test_early_exit_leaves_the_shared_model_whole(target):
    layers = target.model.config.num_hidden_layers
    before = target.model(input_ids=torch.tensor([[5, 6, 7]])).logits
    speculative(target, "early-exit:1", 3)
    assert target.model.config.num_hidden_layers == layers and len(target.model.model.layers) == layers
    assert torch.equal(target.model(input_ids=torch.tensor([[5, 6, 7]])).logits, before)


def test_a_sampled_trace_with_a_flipped_decision_is_refused(target, far_draft):
    from engine import TraceFormatError

    trace = speculative(target, "model:tiny-gpt2", 3, draft_lm=far_draft, verify="sample", temperature=1.4, seed=1)
    r = next(i for i, rnd in enumerate(trace.rounds) if rnd.drafts and rnd.drafts[0].status == "kept")
    data = trace.to_dict()
    first = data["rounds"][r]["drafts"][0]
    if first["p"] < first["q"]:         # a u above p/q would have rejected it
        first["u"] = 1.0
    else:                               # p >= q: no u rejects it, so "rejected" contradicts the numbers
        first["status"] = "rejected"
    with pytest.raises(TraceFormatError, match=f"round {r + 1}, draft 1"):
        Trace.from_dict(data)
