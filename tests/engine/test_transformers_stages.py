"""transformers' extra stages (typical, ε, η, top-h, no-repeat n-gram): their published test values, and decodes
through them equal to `generate` with the same generation config."""
from __future__ import annotations

import pytest
import torch

from engine import DecodeConfig, decode
from engine.samplers.shaping import build_processors
from engine.samplers.stages import stage_name
from generate_reference import generate_ids, strip_generated

NONE = torch.zeros((1, 1), dtype=torch.long)


def shaped(config: DecodeConfig, probs, context=NONE) -> torch.Tensor:
    """exp of the chain's scores for logits = log(probs): the kept probabilities, 0 where cut."""
    logits = torch.log(torch.tensor([probs], dtype=torch.float))
    return torch.exp(build_processors(config)(context, logits))[0]


# the values of tests/generation/test_logits_process.py in transformers (test_typical_dist_warper,
# test_epsilon_dist_warper, test_eta_dist_warper, test_top_h_dist_warper), each row a case
@pytest.mark.parametrize("setting,probs,expected", [
    ({"typical_p": 0.5}, [0.97, 0.01, 0.01, 0.01], [0.97, 0, 0, 0]),
    ({"typical_p": 0.5}, [0.4, 0.2, 0.2, 0.2], [0, 0.2, 0.2, 0.2]),
    ({"epsilon_cutoff": 0.1}, [0.87, 0.099, 0.001, 0.03], [0.87, 0, 0, 0]),
    ({"epsilon_cutoff": 0.1}, [0.4, 0.299, 0.101, 0.2], [0.4, 0.299, 0.101, 0.2]),
    ({"eta_cutoff": 0.0625}, [0.0, 0.1, 0.8, 0.1], [0.0, 0.1, 0.8, 0.1]),
    ({"eta_cutoff": 0.0625}, [0.01, 0.04, 0.9, 0.05], [0, 0, 0.9, 0]),
    ({"top_h": 0.3}, [0.97, 0.01, 0.01, 0.01], [0.97, 0, 0, 0]),
    ({"top_h": 0.7}, [0.4, 0.3, 0.2, 0.1], [0.4, 0.3, 0, 0]),
    ({"top_h": 1.0}, [0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]),
    ({"top_h": 0.4}, [0.75, 0.25, 0.0, 0.0], [0.75, 0, 0, 0]),
])
def test_transformers_published_values(setting, probs, expected):
    config = DecodeConfig(strategy="sample", **setting)
    torch.testing.assert_close(shaped(config, probs), torch.tensor(expected), rtol=1e-3, atol=1e-3)


def test_no_repeat_ngram_published_values():
    # test_no_repeat_ngram_dist_processor: contexts [1, 1, 2, 1] and [0, 1, 0, 1] over 3 tokens
    for size, expected in ((2, [[False, True, True], [True, False, False]]),
                           (3, [[False, False, False], [True, False, False]])):
        processors = build_processors(DecodeConfig(no_repeat_ngram_size=size))
        out = processors(torch.tensor([[1, 1, 2, 1], [0, 1, 0, 1]]), torch.zeros((2, 3)))
        assert torch.isinf(out).tolist() == expected


def test_eta_by_hand():
    # η = 0.3 on [0.5, 0.3, 0.15, 0.05]: H = 1.1437 nats, cutoff min(0.3, sqrt(0.3) e^-H = 0.1746) = 0.1746:
    # 0.15 and 0.05 go; ε = 0.1 on the same keeps 0.15
    probs = [0.5, 0.3, 0.15, 0.05]
    assert (shaped(DecodeConfig(strategy="sample", eta_cutoff=0.3), probs) > 0).tolist() == [True, True, False, False]
    assert (shaped(DecodeConfig(strategy="sample", epsilon_cutoff=0.1), probs) > 0).tolist() == [True, True, True,
                                                                                               False]


def test_generate_order_and_names():
    # GenerationMixin._get_logits_processor: history processors, then temperature → top-h → top-k → top-p →
    # min-p → typical → ε → η
    config = DecodeConfig(strategy="sample", repetition_penalty=1.2, no_repeat_ngram_size=3, temperature=0.8,
                          top_h=0.5, top_k=20, top_p=0.9, min_p=0.05, typical_p=0.9, epsilon_cutoff=0.001,
                          eta_cutoff=0.002)
    assert [stage_name(p) for p in build_processors(config)] == [
        ("repetition_penalty", 1.2), ("no_repeat_ngram", 3.0), ("temperature", pytest.approx(0.8)),
        ("top_h", 0.5), ("top_k", 20.0), ("top_p", 0.9), ("min_p", 0.05), ("typical_p", 0.9),
        ("epsilon", 0.001), ("eta", pytest.approx(0.002))]
    # greedy gets the history processors only, as generate gives it no warper
    assert [stage_name(p)[0] for p in build_processors(config.replace(strategy="greedy"))] == [
        "repetition_penalty", "no_repeat_ngram"]


STAGE_OF = {"typical_p": "typical_p", "epsilon_cutoff": "epsilon", "eta_cutoff": "eta", "top_h": "top_h",
            "no_repeat_ngram_size": "no_repeat_ngram"}


@pytest.mark.parametrize("settings", [
    {"typical_p": 0.6}, {"epsilon_cutoff": 0.02}, {"eta_cutoff": 0.01}, {"top_h": 0.5},
    {"no_repeat_ngram_size": 2},
    {"typical_p": 0.8, "epsilon_cutoff": 0.005, "eta_cutoff": 0.003, "top_h": 0.7, "no_repeat_ngram_size": 2,
     "temperature": 1.3, "top_k": 30, "top_p": 0.95, "min_p": 0.02, "repetition_penalty": 1.3},
])
@pytest.mark.parametrize("seed", [0, 11])
def test_sampling_through_the_new_stages_matches_generate(llama, settings, seed):
    cfg = DecodeConfig(strategy="sample", max_new_tokens=12, seed=seed, **settings)
    trace = decode(llama, "The capital of France is", cfg)
    torch.manual_seed(seed)
    out = generate_ids(llama, trace.prompt_token_ids, do_sample=True, max_new_tokens=12,
                       **{"top_k": 0, "temperature": 1.0, **settings})
    assert trace.best.token_ids == strip_generated(out[0], len(trace.prompt_token_ids), 0, llama.eos_token_ids)
    recorded = [s.name for s in trace.steps[0].stages]
    assert {STAGE_OF[k] for k in settings if k in STAGE_OF} <= set(recorded)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_greedy_with_no_repeat_ngram_matches_generate(tiny, size):
    trace = decode(tiny, "The capital of France is", DecodeConfig(max_new_tokens=14, no_repeat_ngram_size=size))
    out = generate_ids(tiny, trace.prompt_token_ids, do_sample=False, max_new_tokens=14, no_repeat_ngram_size=size)
    assert trace.best.token_ids == strip_generated(out[0], len(trace.prompt_token_ids), 0, tiny.eos_token_ids)
    context = trace.prompt_token_ids + trace.best.token_ids
    grams = [tuple(context[i:i + size]) for i in range(len(context) - size + 1)]
    assert len(grams) == len(set(grams))          # and no n-gram occurs twice in the whole context


@pytest.mark.parametrize("size", [2, 3])
def test_beam_with_no_repeat_ngram_matches_generate(tiny, size):
    cfg = DecodeConfig(strategy="beam", num_beams=3, num_return_sequences=3, max_new_tokens=10,
                       no_repeat_ngram_size=size, repetition_penalty=1.2)
    trace = decode(tiny, "The capital of France is", cfg)
    out = generate_ids(tiny, trace.prompt_token_ids, do_sample=False, num_beams=3, num_return_sequences=3,
                       max_new_tokens=10, no_repeat_ngram_size=size, repetition_penalty=1.2)
    P = len(trace.prompt_token_ids)
    assert [s.token_ids for s in trace.sequences] == [strip_generated(row, P, None, tiny.eos_token_ids)
                                                      for row in out]
