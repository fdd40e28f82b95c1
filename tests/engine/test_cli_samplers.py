"""The engine-specific samplers on the command line: a flag for each, the three orders, and one error line that
names the flag as typed for a bad value or a setting the chosen order's engine lacks."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from cli_helpers import assert_one_error_line, cli_in_process, run_cli
from engine.cli.main import main
from engine.cli.samplers import state_text

SAMPLE = ["--prompt", "The capital of France is", "--strategy", "sample"]
LLAMA = [*SAMPLE, "--sampler-order", "llama.cpp"]


@pytest.mark.parametrize("args, words", [
    ([*LLAMA, "--typical-p", "2"], ["--typical-p", "must be in [0, 1]"]),
    ([*SAMPLE, "--epsilon-cutoff", "1"], ["--epsilon-cutoff", "must be in [0, 1)"]),
    ([*SAMPLE, "--eta-cutoff", "-0.1"], ["--eta-cutoff", "must be in [0, 1)"]),
    ([*SAMPLE, "--top-h", "1.5"], ["--top-h", "must be in [0, 1]"]),
    ([*SAMPLE, "--no-repeat-ngram-size", "65"], ["--no-repeat-ngram-size", "64"]),
    ([*LLAMA, "--presence-penalty", "101"], ["--presence-penalty", "between -100 and 100"]),
    ([*LLAMA, "--frequency-penalty", "-101"], ["--frequency-penalty", "between -100 and 100"]),
    ([*LLAMA, "--penalty-last-n", "-2"], ["--penalty-last-n", "-1 (the whole context)"]),
    ([*LLAMA, "--dry-multiplier", "-1"], ["--dry-multiplier", "between 0 (off) and 100"]),
    ([*LLAMA, "--dry-base", "0.5"], ["--dry-base", "between 1 and 8"]),
    ([*LLAMA, "--dry-allowed-length", "65"], ["--dry-allowed-length", "between 0 and 64"]),
    ([*LLAMA, "--dry-penalty-last-n", "-5"], ["--dry-penalty-last-n", "-1 (the whole context)"]),
    ([*LLAMA, "--dry-sequence-breakers", "[1, 2]"], ["--dry-sequence-breakers", "JSON list"]),
    ([*LLAMA, "--dry-sequence-breakers", "not json"], ["--dry-sequence-breakers", "'not json'"]),
    ([*LLAMA, "--top-n-sigma", "-1"], ["--top-n-sigma", "standard deviations"]),
    ([*LLAMA, "--xtc-probability", "1.5"], ["--xtc-probability", "must be in [0, 1]"]),
    ([*LLAMA, "--xtc-threshold", "-0.5"], ["--xtc-threshold", "must be in [0, 1]"]),
    ([*LLAMA, "--dynatemp-range", "-1"], ["--dynatemp-range", "between 0 (off) and 100"]),
    ([*LLAMA, "--dynatemp-exponent", "0"], ["--dynatemp-exponent", "(0, 100]"]),
    ([*LLAMA, "--mirostat", "3"], ["--mirostat", "0 (off), 1 or 2"]),
    ([*LLAMA, "--mirostat", "1.5"], ["--mirostat", "invalid int value"]),
    ([*LLAMA, "--mirostat-tau", "0"], ["--mirostat-tau", "(0, 100] bits"]),
    ([*LLAMA, "--mirostat-eta", "2"], ["--mirostat-eta", "(0, 1]"]),
    ([*LLAMA, "--samplers", "top_k;nucleus"], ["--samplers", "'nucleus' is not one of llama.cpp's samplers"]),
    ([*LLAMA, "--samplers", ";".join(["dry"] * 1000)], ["--samplers", "'dry' is listed 1,000 times", "at most twice"]),
    ([*LLAMA, "--top-n-sigma", "nan"], ["--top-n-sigma", "finite"]),
    ([*SAMPLE, "--sampler-order", "sglang"], ["--sampler-order", "invalid choice", "vllm"]),
    # a setting the order's engine lacks: named, with the order that has it
    ([*SAMPLE, "--sampler-order", "vllm", "--typical-p", "0.9"], ["--typical-p", "vllm order has no such",
                                                                   "transformers and llama.cpp", "--sampler-order"]),
    ([*SAMPLE, "--mirostat", "2"], ["--mirostat", "transformers order has no such", "llama.cpp"]),
    ([*LLAMA, "--epsilon-cutoff", "0.01"], ["--epsilon-cutoff", "llama.cpp order has no such", "transformers"]),
    ([*SAMPLE, "--presence-penalty", "0.5"], ["--presence-penalty", "llama.cpp and vllm"]),
])
def test_a_bad_sampler_setting_gives_one_line_naming_its_flag(capsys, monkeypatch, args, words):
    """Checked before any model loads (no --model: the bundled default is never reached)."""
    assert_one_error_line(cli_in_process(capsys, monkeypatch, *args), *words)


def test_the_vllm_order_runs_and_is_named(capsys, monkeypatch, tiny_llama_folder):
    _, folder = tiny_llama_folder
    code, out, err = run_cli(capsys, monkeypatch, main, ["decode", "--model", folder, *SAMPLE, "--sampler-order",
                                                         "vllm", "--presence-penalty", "0.5", "--top-k", "5",
                                                         "--max-new-tokens", "2", "--stages"])
    assert code == 0, err
    assert "stages in vLLM's order" in out
    assert re.search(r"^\s+top-k 5\s+kept\s+5\b", out, re.M), out
    # the penalties stage names the setting that is on, not the repeat penalty's 1 it records
    assert re.search(r"^\s+penalties: presence 0\.5\s+kept\s+\d+", out, re.M), out


def test_the_state_of_a_stage_reads_as_a_phrase():
    """What each stateful stage records (engine.trace.Stage.state), as `--stages` prints it."""
    def stage(**state):
        return SimpleNamespace(name="x", value=0.0, state=state)

    assert state_text(stage(mu=10.0, mu_next=9.8125)) == "mu 10 -> 9.812"
    assert state_text(stage(draw=0.25, fired=True)) == "draw 0.25, fired"
    assert state_text(stage(draw=0.75, fired=False)) == "draw 0.75, not fired"
    assert state_text(stage(fired=False)) == "no draw"
    assert state_text(stage(run=3, penalised=4)) == "run 3, tokens penalised 4"
    assert state_text(stage(temperature=0.8312)) == "temperature 0.8312"
    assert state_text(stage(window=64)) == "window 64"
    assert state_text(SimpleNamespace(name="top_k", value=5.0)) == ""        # a stage of an older trace: none


def test_stages_prints_the_state_each_stateful_stage_carried(capsys, monkeypatch, tiny_llama_folder):
    """Mirostat: μ starts at 2τ and each step starts from the μ the step before left; XTC fires when its draw
    is at most its probability (llama.cpp's rules)."""
    _, folder = tiny_llama_folder
    code, out, err = run_cli(capsys, monkeypatch, main, ["decode", "--model", folder, *LLAMA, "--mirostat", "2",
                                                         "--mirostat-tau", "4", "--max-new-tokens", "3", "--stages"])
    assert code == 0, err
    mus = re.findall(r"^\s+mirostat tau 4\s+kept\s+\d+.*\[mu ([0-9.]+) -> ([0-9.]+)\]$", out, re.M)
    assert len(mus) == 3 and float(mus[0][0]) == 8.0
    assert [m[0] for m in mus[1:]] == [m[1] for m in mus[:-1]]          # carried from step to step
    code, out, err = run_cli(capsys, monkeypatch, main, ["decode", "--model", folder, *LLAMA, "--xtc-probability",
                                                         "0.5", "--xtc-threshold", "0.001", "--max-new-tokens", "4",
                                                         "--stages", "--seed", "3"])
    assert code == 0, err
    draws = re.findall(r"^\s+XTC >= 0\.001\s+kept\s+(\d+).*\[draw ([0-9.e-]+), (fired|not fired)\]$", out, re.M)
    assert len(draws) == 4, out
    for kept, draw, fired in draws:
        assert (fired == "fired") == (float(draw) <= 0.5)
        if fired == "fired":
            assert int(kept) < 300              # it set the top choices aside
