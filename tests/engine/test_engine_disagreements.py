"""vLLM's chain by its rules, and one test per rule where the engines part: the same settings, another set.
vLLM's own penalty tests are property tests (tests/v1/sample/test_sampler.py: which token ends lowest), so its
cases here are computed by hand from vllm/model_executor/layers/utils.py `apply_penalties`."""
from __future__ import annotations

import pytest
import torch

from engine import DecodeConfig
from engine.samplers.chain import prepare
from engine.samplers.order import kept
from engine.samplers.shaping import build_processors
from engine.samplers.stages import chain_in_order, stage_name

ORDERS = ("transformers", "llama.cpp", "vllm")


def chain(config: DecodeConfig, order: str, prompt_length: int | None = None):
    processors = build_processors(config.replace(sampler_order=order))
    prepare(processors, prompt_length=prompt_length)
    return processors


def kept_ids(config, order, logits, context=(0,), prompt_length=None) -> list:
    mask = kept(chain(config, order, prompt_length), torch.tensor([list(context)]), torch.tensor(logits))
    return mask.nonzero().flatten().tolist()


def after(config, order, logits, context, prompt_length=None) -> list:
    processors = chain(config, order, prompt_length)
    return processors(torch.tensor([list(context)]), torch.tensor([logits]))[0].tolist()


def test_vllm_penalties_by_hand():
    # prompt [0, 1], output [1, 2, 2]; repetition 2, frequency 0.5, presence 0.3:
    # 0 (prompt only): 1.0 / 2 = 0.5, no frequency or presence (they count the output)
    # 1 (prompt and output, once): -1.0 · 2 = -2, then - 0.5 - 0.3 = -2.8
    # 2 (output, twice): 2.0 / 2 = 1, then - 2 · 0.5 - 0.3 = -0.3;   3 and 4 unseen: unchanged
    config = DecodeConfig(strategy="sample", repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.3)
    out = after(config, "vllm", [1.0, -1.0, 2.0, 0.5, 0.0], [0, 1, 1, 2, 2], prompt_length=2)
    assert out == pytest.approx([0.5, -2.8, -0.3, 0.5, 0.0])


@pytest.mark.parametrize("settings,probs,expected", [
    # transformers' test values for the same rules (test_top_p_dist_warper, test_min_p_dist_warper): vLLM's
    # top-p and min-p agree with them
    ({"top_p": 0.8}, [0.3, 0.1, 0.1, 0.5], [0, 3]),
    ({"top_p": 0.8}, [0.15, 0.3, 0.3, 0.25], [1, 2, 3]),
    ({"min_p": 0.05}, [0.9, 0.0274, 0.047, 0.0274], [0, 2]),
    ({"min_p": 0.05}, [0.97, 0.01, 0.01, 0.01], [0]),
])
def test_vllm_top_p_and_min_p(settings, probs, expected):
    config = DecodeConfig(strategy="sample", **settings)
    assert kept_ids(config, "vllm", torch.log(torch.tensor(probs)).tolist()) == expected


def test_vllm_order_and_greedy():
    config = DecodeConfig(strategy="sample", sampler_order="vllm", repetition_penalty=1.2, presence_penalty=0.4,
                          temperature=0.7, min_p=0.05, top_k=40, top_p=0.9)
    assert [stage_name(p)[0] for p in build_processors(config)] == ["penalties", "temperature", "min_p", "top_k",
                                                                    "top_p"]
    # greedy takes the argmax right after the penalties
    assert [stage_name(p)[0] for p in build_processors(config.replace(strategy="greedy"))] == ["penalties"]


def test_top_k_keeps_ties_in_transformers_and_vllm_but_exactly_k_in_llama_cpp():
    logits = [2.0, 2.0, 2.0, 0.0, -1.0]
    config = DecodeConfig(strategy="sample", top_k=2)
    assert kept_ids(config, "transformers", logits) == [0, 1, 2]
    assert kept_ids(config, "vllm", logits) == [0, 1, 2]
    assert len(kept_ids(config, "llama.cpp", logits)) == 2


def test_min_p_after_temperature_in_transformers_and_vllm_before_it_in_llama_cpp():
    # p = [0.6, 0.25, 0.1, 0.05], min-p 0.2, temperature 2: before the temperature min-p keeps p >= 0.12 (two
    # tokens); after it, p ~ sqrt(p) has ratios 1, 0.645, 0.408, 0.289 to the top: all four stay
    logits = torch.log(torch.tensor([0.6, 0.25, 0.1, 0.05])).tolist()
    config = DecodeConfig(strategy="sample", min_p=0.2, temperature=2.0)
    assert kept_ids(config, "transformers", logits) == [0, 1, 2, 3]
    assert kept_ids(config, "vllm", logits) == [0, 1, 2, 3]
    assert kept_ids(config, "llama.cpp", logits) == [0, 1]


def test_the_repetition_penalty_sees_the_whole_context_or_llama_cpps_window():
    # token 1 occurs once, 70 tokens before the end: transformers (whole context) and vLLM (prompt and output)
    # penalise it; llama.cpp's window of 64 does not see it, unless the window is the whole context (-1)
    context = [1] + [0] * 69
    logits = [0.0, 2.0, 1.0]
    config = DecodeConfig(strategy="greedy", repetition_penalty=4.0)
    assert after(config, "transformers", logits, context)[1] == pytest.approx(0.5)
    assert after(config, "vllm", logits, context, prompt_length=70)[1] == pytest.approx(0.5)
    assert after(config, "llama.cpp", logits, context)[1] == pytest.approx(2.0)
    assert after(config.replace(penalty_last_n=-1), "llama.cpp", logits, context)[1] == pytest.approx(0.5)


def test_presence_and_frequency_count_the_window_in_llama_cpp_and_the_output_in_vllm():
    # prompt [2, 3], output [3, 3]: llama.cpp counts 2 once and 3 three times (its window holds the prompt);
    # vLLM counts 2 not at all (prompt only) and 3 twice
    context, logits = [2, 3, 3, 3], [0.0, 0.0, 0.0, 0.0]
    config = DecodeConfig(strategy="sample", frequency_penalty=1.0, presence_penalty=0.5)
    assert after(config, "llama.cpp", logits, context) == pytest.approx([0, 0, -1.5, -3.5])
    assert after(config, "vllm", logits, context, prompt_length=2) == pytest.approx([0, 0, 0, -2.5])


def test_chain_in_order_skips_what_an_order_lacks_and_says_so():
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", top_k=3, min_p=0.1, typical_p=0.9,
                          dry_multiplier=0.8, xtc_probability=0.5, presence_penalty=0.2)
    logits = torch.randn(40, generator=torch.Generator().manual_seed(0))
    texts = [f"t{i}" for i in range(40)]
    context = torch.tensor([[1, 2, 3, 1, 2]])
    chains = {order: chain_in_order(texts, config, context, logits, [0, 1, 2], order, prompt_length=3)
              for order in ORDERS}
    assert chains["llama.cpp"].skipped == []
    assert chains["transformers"].skipped == ["presence_penalty", "dry_multiplier", "xtc_probability"]
    assert chains["vllm"].skipped == ["dry_multiplier", "typical_p", "xtc_probability"]
    assert [s.name for s in chains["vllm"].stages] == ["penalties", "min_p", "top_k"]
    assert chains["vllm"].stages[0].state == {"window": 2}          # the output tokens after the prompt of 3


def test_describe_names_every_stage_in_its_chains_order():
    from engine.samplers.stages import describe

    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", presence_penalty=0.3, dry_multiplier=0.8,
                          top_k=40, min_p=0.1, temperature=1.5, dynatemp_range=0.3, xtc_probability=0.5)
    assert describe(config) == ("penalties (repeat 1, frequency 0, presence 0.3, last 64), DRY 0.8, top-k 40, "
                                "min-p 0.1, XTC threshold 0.1 (chance 0.5), temperature 1.5 ± 0.3 (dynamic), "
                                "in llama.cpp's order")
    assert describe(config.replace(mirostat=2, temperature=0.8)).startswith("temperature 0.8, mirostat v2 (τ 5")
    assert describe(DecodeConfig(strategy="sample", typical_p=0.9, eta_cutoff=0.01)) == "typical-p 0.9, η-cutoff 0.01"
