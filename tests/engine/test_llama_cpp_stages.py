"""llama.cpp's stages against the values of its own tests/test-sampling.cpp (inputs given as probabilities, the
logits their logs, expected probabilities to 1e-5), hand-computed cases, and mirostat's μ step by step."""
from __future__ import annotations

import math

import pytest
import torch

from engine import DecodeConfig
from engine.samplers import llama as ll
from engine.samplers.chain import accept, prepare
from engine.samplers.order import llama_cpp_processors
from engine.samplers.stages import stage_name

PROBS = [0.1, 0.2, 0.3, 0.4]


def run(stage, probs, context=(0,), token_texts=None) -> list:
    """The renormalised probabilities after one stage (0 where it cut), by token id."""
    prepare([stage], prompt_length=None, token_texts=token_texts)
    logits = torch.log(torch.tensor([probs], dtype=torch.float))
    return torch.softmax(stage(torch.tensor([list(context)]), logits), -1)[0].tolist()


def by_id(expected_sorted: list, ids: list, size: int) -> list:
    """llama.cpp's expected list (in its candidates' order) placed at the token ids it belongs to."""
    out = [0.0] * size
    for token, p in zip(ids, expected_sorted):
        out[token] = p
    return out


# test-sampling.cpp: test_temp, test_temp_ext (delta 0), test_top_k, test_top_p, test_min_p, test_top_n_sigma
@pytest.mark.parametrize("stage,expected", [
    (ll.Temperature(1.0), PROBS),
    (ll.Temperature(0.0), [0, 0, 0, 1]),
    (ll.Temperature(1.0, 0.0, 1.0), PROBS),
    (ll.Temperature(0.0, 0.0, 1.0), [0, 0, 0, 1]),
    (ll.TopK(1), [0, 0, 0, 1]),
    (ll.TopK(3), by_id([0.44444, 0.33333, 0.22222], [3, 2, 1], 4)),
    (ll.TopK(4), PROBS),
    (ll.TopK(0), PROBS),
    (ll.TopP(0.0), [0, 0, 0, 1]),
    (ll.TopP(0.7), by_id([0.571429, 0.428571], [3, 2], 4)),
    (ll.TopP(0.8), by_id([0.44444, 0.33333, 0.22222], [3, 2, 1], 4)),
    (ll.TopP(1.0), PROBS),
    (ll.MinP(0.00), PROBS),
    (ll.MinP(0.24), PROBS),
    (ll.MinP(0.26), [0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]),
    (ll.MinP(0.49), [0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]),
    (ll.MinP(0.51), [0, 0, 0.3 / 0.7, 0.4 / 0.7]),
    (ll.MinP(0.74), [0, 0, 0.3 / 0.7, 0.4 / 0.7]),
    (ll.MinP(0.76), [0, 0, 0, 1]),
    (ll.MinP(1.00), [0, 0, 0, 1]),
    (ll.MinP(1.05), [0, 0, 0, 1]),
    (ll.TopNSigma(1.0), [0, 0, 0.428571, 0.571429]),
    (ll.TopNSigma(0.0), PROBS),
    (ll.TopNSigma(3.0), PROBS),
])
def test_llama_cpp_published_values(stage, expected):
    assert run(stage, PROBS) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("probs,expected,p", [
    # test_typical: llama.cpp compares without renormalising; renormalised, {0.2, 0.2, 0.2} is 1/3 each
    ([0.97, 0.01, 0.01, 0.01], [1, 0, 0, 0], 0.5),
    ([0.4, 0.2, 0.2, 0.2], [0, 1 / 3, 1 / 3, 1 / 3], 0.5),
])
def test_typical_published_values(probs, expected, p):
    assert run(ll.Typical(p), probs) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("threshold,kept", [
    # test_xtc on {0.4, 0.3, 0.2, 0.1} (probability 0.99 there, 1 here so that the draw always fires): every
    # token at or above the threshold goes but the least likely of them; at 0.39 only 0.4 is above: none goes
    (0.09, [3]), (0.19, [2, 3]), (0.29, [1, 2, 3]), (0.39, [0, 1, 2, 3]),
])
def test_xtc_published_values(threshold, kept):
    stage = ll.Xtc(1.0, threshold, seed=0)
    after = run(stage, [0.4, 0.3, 0.2, 0.1])
    assert [i for i, p in enumerate(after) if p > 0] == kept
    assert stage.state()["fired"] is True and 0 <= stage.state()["draw"] < 1


def test_xtc_draw_is_seeded_by_run_and_position_and_decides_whether_it_fires():
    draws = []
    for length in range(1, 40):
        stage = ll.Xtc(0.5, 0.2, seed=3)
        after = run(stage, [0.4, 0.3, 0.2, 0.1], context=[0] * length)
        state = stage.state()
        assert state["fired"] == (state["draw"] <= 0.5)
        assert (after[0] == 0) == state["fired"]          # 0.4 and 0.3 go when it fires; 0.2 stays
        again = ll.Xtc(0.5, 0.2, seed=3)
        run(again, [0.4, 0.3, 0.2, 0.1], context=[7] * length)
        assert again.state() == state                      # same seed and position: same draw
        draws.append(state["draw"])
    assert 5 < sum(d <= 0.5 for d in draws) < 34             # it fires at about half the positions
    assert ll.Xtc(0.5, 0.2, seed=4).state() == {} and run(ll.Xtc(0.5, 0.6, seed=3), PROBS) == pytest.approx(PROBS)


@pytest.mark.parametrize("last,expected,repeat,frequency,presence", [
    # test_penalties: 5 tokens of 0.2; the window is the given tokens
    ([0], [0, 0.25, 0.25, 0.25, 0.25], 50.0, 0.0, 0.0),
    ([0, 1, 2], [0, 0, 0, 0.5, 0.5], 50.0, 0.0, 0.0),
    ([0, 1, 2, 0, 0], [0, 0, 0, 0.5, 0.5], 50.0, 0.0, 0.0),
    ([0], [0.000011, 0.249997, 0.249997, 0.249997, 0.249997], 1.0, 5.0, 5.0),
    ([0, 1, 2], [0.000023, 0.000023, 0.000023, 0.499966, 0.499966], 1.0, 5.0, 5.0),
    ([0, 1, 2, 0, 0], [0.000000, 0.000023, 0.000023, 0.499977, 0.499977], 1.0, 5.0, 5.0),
])
def test_penalties_published_values(last, expected, repeat, frequency, presence):
    stage = ll.Penalties(repeat, frequency, presence, last_n=len(last))
    assert run(stage, [0.2] * 5, context=last) == pytest.approx(expected, abs=1e-5)
    assert stage.state() == {"window": len(last)}


BREAKER_TEXTS = ["a", "b", "c", "\n", "e"]      # token 3 is a breaker: its text holds "\n"


@pytest.mark.parametrize("probs,last,expected,multiplier,allowed,breakers", [
    # test_dry (base 1.1, last-n = the tokens given); token breakers {{3}} become a breaker string here
    ([0.25] * 4, [0, 1], [0.25] * 4, 1.0, 2, []),
    ([0.25] * 4, [0, 1, 2, 0, 1], [0.296923, 0.296923, 0.109232, 0.296923], 1.0, 2, []),
    ([0.2] * 5, [0, 1, 3, 4, 0, 1], [0.2] * 5, 1.0, 2, ["\n"]),
    ([0.2] * 5, [0, 1, 2, 0, 1], [0.241818, 0.241818, 0.032727, 0.241818, 0.241818], 2.0, 2, []),
    ([0.2] * 5, [0, 1, 2, 3, 4, 0, 1], [0.2] * 5, 1.0, 4, []),
])
def test_dry_published_values(probs, last, expected, multiplier, allowed, breakers):
    stage = ll.Dry(multiplier, 1.1, allowed, len(last), breakers)
    assert run(stage, probs, context=last, token_texts=BREAKER_TEXTS) == pytest.approx(expected, abs=1e-5)


def test_dry_by_hand():
    # a b c d | a b c → d would extend a run of 3 (a b c): penalty 0.8 · 1.75 ** (3 - 2) = 1.4; c would extend
    # the run "c" of length 1 < 2: no penalty. A breaker between the runs ("\n" at 2) caps the run at 2 tokens
    stage = ll.Dry(0.8, 1.75, 2, -1, ["\n"])
    texts = ["a", "b", "c", "d", "x\ny"]
    out = run(stage, [0.2] * 5, context=[0, 1, 2, 3, 0, 1, 2], token_texts=texts)
    z = 4 + math.exp(-1.4)
    assert out == pytest.approx([1 / z, 1 / z, 1 / z, math.exp(-1.4) / z, 1 / z], abs=1e-6)
    assert stage.state() == {"run": 3, "penalised": 1}
    capped = run(stage, [0.2] * 5, context=[0, 1, 2, 3, 0, 4, 1, 2], token_texts=texts)   # b c after the breaker
    z = 4 + math.exp(-0.8)
    assert capped == pytest.approx([1 / z, 1 / z, 1 / z, math.exp(-0.8) / z, 1 / z], abs=1e-6)


def test_dynamic_temperature_by_hand():
    # H([0.1, 0.2, 0.3, 0.4]) = 1.279854 nats, ln 4 = 1.386294: normalised 0.923220; range 0.5 around t = 1,
    # exponent 1: T = 0.5 + 1.0 · 0.923220 = 1.423220; exponent 2: 0.5 + 0.852336
    h = -sum(p * math.log(p) for p in PROBS) / math.log(4)
    for exponent, t in ((1.0, 0.5 + h), (2.0, 0.5 + h * h)):
        stage = ll.Temperature(1.0, 0.5, exponent)
        out = run(stage, PROBS)
        weights = [p ** (1 / t) for p in PROBS]
        assert out == pytest.approx([w / sum(weights) for w in weights], abs=1e-6)
        assert stage.state() == {"temperature": pytest.approx(t, abs=1e-6)}


def test_mirostat_v2_mu_over_three_steps_by_hand():
    # τ = 1.05 bits, η = 1, μ starts at 2τ = 2.1; [0.5, 0.25, 0.125, 0.125] has surprises 1, 2, 3, 3 bits
    # step 1: μ = 2.1 keeps 0.5 and 0.25 (2/3, 1/3); token 1 drawn: surprise log2 3 → μ = 2.1 - (log2 3 - 1.05)
    # step 2: μ = 3.15 - log2 3 = 1.565 keeps 0.5 alone; token 0: surprise 0 → μ = 4.2 - log2 3 = 2.615
    # step 3: μ = 2.615 keeps 0.5 and 0.25; token 0: surprise log2 1.5 → μ = 2.615 - (0.585 - 1.05) = 3.080
    stage = ll.Mirostat(2, tau=1.05, eta=1.0)
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.125, 0.125]]))
    log3 = math.log2(3)
    context = [9]
    steps = [(1, 2.1, [2 / 3, 1 / 3, 0, 0], 3.15 - log3), (0, 3.15 - log3, [1, 0, 0, 0], 4.2 - log3),
             (0, 4.2 - log3, [2 / 3, 1 / 3, 0, 0], 6.25 - 2 * log3)]
    for token, mu, kept, mu_next in steps:
        ids = torch.tensor([context])
        out = torch.softmax(stage(ids, logits.clone()), -1)[0].tolist()
        assert out == pytest.approx(kept, abs=1e-6)
        assert stage.state(token) == {"mu": pytest.approx(mu), "mu_next": pytest.approx(mu_next)}
        accept([stage], ids, token)
        context = context + [token]
    # a fresh stage given only the store finds the μ of any context it has seen (a replayed step)
    again = ll.Mirostat(2, tau=1.05, eta=1.0)
    again.carry(stage)
    again(torch.tensor([[9, 1]]), logits.clone())
    assert again.state() == {"mu": pytest.approx(3.15 - log3)}


def test_mirostat_v1_keeps_the_k_of_its_zipf_estimate():
    # p_i ∝ 1 / i^2 over 8 tokens: the fitted exponent ŝ is exactly 2, ε̂ = 1, so with μ = 2τ = 3,
    # k = (ε̂ · 2^μ / (1 - 8^-ε̂)) ** (1 / ŝ) = (8 / 0.875) ** 0.5 = 3.024: the top 3 stay
    weights = [1 / i ** 2 for i in range(1, 9)]
    probs = [w / sum(weights) for w in weights]
    out = run(ll.Mirostat(1, tau=1.5, eta=0.1), probs)
    assert [p > 0 for p in out] == [True] * 3 + [False] * 5


def test_default_order_and_a_custom_list():
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", repetition_penalty=1.1,
                          presence_penalty=0.5, dry_multiplier=0.8, top_n_sigma=2.0, top_k=40, typical_p=0.9,
                          top_p=0.9, min_p=0.05, xtc_probability=0.5, temperature=0.8, dynatemp_range=0.3)
    assert [stage_name(p)[0] for p in llama_cpp_processors(config)] == [
        "penalties", "dry", "top_n_sigma", "top_k", "typical_p", "top_p", "min_p", "xtc", "temperature"]
    custom = config.replace(samplers="temperature;top_k;min_p")
    assert [stage_name(p)[0] for p in llama_cpp_processors(custom)] == ["temperature", "top_k", "min_p"]
    # mirostat replaces the chain (penalties included) with temperature → mirostat
    miro = config.replace(mirostat=2)
    assert [stage_name(p) for p in llama_cpp_processors(miro)] == [("temperature", pytest.approx(0.8)),
                                                                   ("mirostat", 5.0)]
    # a strategy that does not sample gets the stages that read the history only
    assert [stage_name(p)[0] for p in llama_cpp_processors(config.replace(strategy="greedy"))] == ["penalties",
                                                                                                   "dry"]
