"""llama.cpp's sampler order (top-k → top-p → min-p → temperature) against the cases of llama.cpp's own sampler
tests, every expected number computed by hand here; and the case users meet: a token min-p keeps in one order
and drops in the other."""
from __future__ import annotations

import math

import pytest
import torch

from cli_helpers import run_cli
from engine import DecodeConfig, decode
from engine.cli.main import main
from engine.samplers.order import disputed, kept, llama_cpp_processors
from engine.samplers.shaping import build_processors

PROBS = [0.1, 0.2, 0.3, 0.4]


def survivors(**settings) -> list:
    """The renormalised probabilities (by token id, 0 for a dropped token) after llama.cpp's chain."""
    config = DecodeConfig(strategy="sample", **settings)
    logits = torch.log(torch.tensor([PROBS]))
    out = llama_cpp_processors(config)(torch.zeros((1, 1), dtype=torch.long), logits)
    return torch.softmax(out, dim=-1)[0].tolist()


@pytest.mark.parametrize("settings,expected", [
    # top-k: k = 1 keeps 0.4 alone; k = 3 drops 0.1 and renormalises by 0.9; k = 4 and k = 0 (off) keep all
    ({"top_k": 1}, [0, 0, 0, 1]),
    ({"top_k": 3}, [0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]),
    ({"top_k": 4}, PROBS),
    ({"top_k": 0}, PROBS),
    # top-p: keep tokens until their sum reaches p: 0.4 + 0.3 = 0.7 reaches 0.7; 0.8 needs 0.2 as well
    ({"top_p": 1e-6}, [0, 0, 0, 1]),
    ({"top_p": 0.7}, [0, 0, 0.3 / 0.7, 0.4 / 0.7]),
    ({"top_p": 0.8}, [0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]),
    ({"top_p": 1.0}, PROBS),
    # min-p: keep p >= min_p * 0.4: 0.24 -> 0.096 keeps 0.1; 0.26 -> 0.104 drops it; 0.49 -> 0.196 keeps 0.2;
    # 0.51 -> 0.204 drops it; 0.74 -> 0.296 keeps 0.3; 0.76 -> 0.304 drops it
    ({"min_p": 0.0}, PROBS),
    ({"min_p": 0.24}, PROBS),
    ({"min_p": 0.26}, [0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]),
    ({"min_p": 0.49}, [0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]),
    ({"min_p": 0.51}, [0, 0, 0.3 / 0.7, 0.4 / 0.7]),
    ({"min_p": 0.74}, [0, 0, 0.3 / 0.7, 0.4 / 0.7]),
    ({"min_p": 0.76}, [0, 0, 0, 1]),
    # temperature: 1 changes nothing; 0.5 squares every probability: p^2 / (0.01 + 0.04 + 0.09 + 0.16)
    ({"temperature": 1.0}, PROBS),
    ({"temperature": 0.5}, [0.01 / 0.3, 0.04 / 0.3, 0.09 / 0.3, 0.16 / 0.3]),
])
def test_llama_cpp_chain_reproduces_its_sampler_tests(settings, expected):
    assert survivors(**settings) == pytest.approx(expected, abs=1e-6)


def test_temperature_comes_last_so_min_p_sees_the_raw_distribution():
    # p = [0.6, 0.25, 0.1, 0.05], min-p 0.2, temperature 2. llama.cpp: min-p at temperature 1 keeps p >= 0.12,
    # so 0.6 and 0.25. transformers: temperature first gives p ~ sqrt(p), whose ratios to the top one are
    # 1, 0.645, 0.408, 0.289: all at least 0.2, so min-p keeps all four.
    logits = torch.log(torch.tensor([0.6, 0.25, 0.1, 0.05]))
    config = DecodeConfig(strategy="sample", min_p=0.2, temperature=2.0)
    context = torch.zeros((1, 1), dtype=torch.long)
    in_transformers = kept(build_processors(config), context, logits)
    in_llama = kept(llama_cpp_processors(config), context, logits)
    assert in_transformers.tolist() == [True, True, True, True]
    assert in_llama.tolist() == [True, True, False, False]
    assert disputed(logits, in_transformers, in_llama) == [2, 3]     # the likelier of the two first
    after = torch.softmax(llama_cpp_processors(config)(context, logits[None].clone()), -1)[0]
    ratio = math.sqrt(0.6 / 0.25)                                        # temperature 2 on the two kept
    assert after.tolist() == pytest.approx([ratio / (ratio + 1), 1 / (ratio + 1), 0, 0], abs=1e-6)


def test_a_decode_in_llama_cpp_order_records_its_stages_in_that_order(llama):
    config = DecodeConfig(strategy="sample", top_k=40, min_p=0.1, temperature=1.5, max_new_tokens=3,
                          sampler_order="llama.cpp")
    trace = decode(llama, "The capital of France is", config)
    context = torch.tensor([trace.prompt_token_ids])
    with torch.no_grad():
        logits = llama.model(context).logits[0, -1].float()
    step = trace.steps[0]
    assert [s.name for s in step.stages] == ["top_k", "min_p", "temperature"]
    top40 = torch.topk(logits, 40).values
    by_hand = int((top40 >= top40.max() + math.log(0.1)).sum())      # min-p on the top 40, at temperature 1
    assert step.stages[1].kept_count == by_hand == step.kept_count


def test_the_cli_names_the_order(capsys, monkeypatch, tiny_llama_folder):
    _, folder = tiny_llama_folder
    code, out, err = run_cli(capsys, monkeypatch, main, ["decode", "--model", folder, "--prompt", "The capital",
                                                         "--strategy", "sample", "--min-p", "0.1", "--temperature",
                                                         "1.5", "--max-new-tokens", "1", "--stages",
                                                         "--sampler-order", "llama.cpp"])
    assert code == 0, err
    assert "stages in llama.cpp's order" in out
    assert out.index("min-p 0.1") < out.index("temperature 1.5")
    code, _, err = run_cli(capsys, monkeypatch, main, ["decode", "--model", folder, "--prompt", "x",
                                                       "--sampler-order", "sglang"])
    assert code == 2 and "invalid choice" in err


def test_mirostat_replaces_llama_cpps_chain_and_says_which_settings_it_replaced():
    """llama.cpp's common_sampler_init builds temperature → mirostat when mirostat is on: DRY, top-k, typical,
    XTC and the penalties, all samplers llama.cpp has, do not run. They are 'replaced', not 'missing'."""
    from engine.samplers.order import replaced_by_mirostat, skipped

    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", temperature=0.7, mirostat=2, top_k=40,
                          dry_multiplier=0.8, typical_p=0.9, xtc_probability=0.5, presence_penalty=0.4)
    chain = [p.stage[0] for p in llama_cpp_processors(config)]
    assert chain == ["temperature", "mirostat"]
    assert sorted(replaced_by_mirostat(config)) == sorted(["top_k", "dry_multiplier", "typical_p", "xtc_probability",
                                                           "presence_penalty"])
    assert replaced_by_mirostat(DecodeConfig(strategy="sample", sampler_order="llama.cpp", mirostat=2,
                                             dynatemp_range=0.5)) == ["dynatemp_range"]
    # in another order, or without mirostat, or greedy: nothing is replaced; transformers has no mirostat at all
    for other in (dict(sampler_order="transformers"), dict(mirostat=0), dict(strategy="greedy")):
        assert replaced_by_mirostat(config.replace(**other)) == []
    assert "mirostat" in skipped(config.replace(sampler_order="transformers"), ["temperature", "top_k"])


def test_the_largest_gap_between_orders_names_the_token_and_the_stage_that_moved_it():
    """Raw 0.81 / 0.10 / 0.09. One chain has no stage; the other's DRY stage drops token 0, leaving
    0.10 / 0.19 and 0.09 / 0.19. Token 0 differs by 0.81 (token 1 by 0.10 / 0.19 - 0.10 = 0.426): the gap."""
    from engine.samplers.order_gap import largest_gap
    from engine.samplers.stages import OrderedChain

    logits = torch.log(torch.tensor([0.81, 0.10, 0.09]))
    plain = OrderedChain(order="transformers", stages=[], kept=torch.ones(3, dtype=torch.bool), staged=[])
    dry = torch.tensor([[float("-inf"), math.log(0.10), math.log(0.09)]])
    stage = type("S", (), {"name": "dry"})()
    llama = OrderedChain(order="llama.cpp", stages=[stage], kept=torch.tensor([False, True, True]), staged=[dry])
    gap = largest_gap([plain, llama], logits)
    assert gap.token == 0 and gap.order == "llama.cpp" and gap.stage == "dry"
    assert gap.probs == pytest.approx({"transformers": 0.81, "llama.cpp": 0.0})
    assert (gap.raw, gap.before, gap.after) == pytest.approx((0.81, 0.81, 0.0))
    assert gap.size == pytest.approx(0.81)
