"""`python -m engine decode --strategy speculative`: each round printed, the trace saved, and bad values refused
with one line and exit status 2 (run in this process on a tiny model saved to a folder)."""
from __future__ import annotations

import pytest

from cli_helpers import run_cli
from tiny_models import tiny_llama
from engine import Trace
from engine.cli.main import main

PROMPT = "The capital of France is Paris. The capital of Italy is"


@pytest.fixture(scope="module")
def other_vocabulary(tmp_path_factory):
    lm = tiny_llama(vocab_size=320)
    folder = tmp_path_factory.mktemp("tiny-llama-320")
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return str(folder)


def decode_args(folder, *extra):
    return ["decode", "--model", folder, "--prompt", PROMPT, "--max-new-tokens", "10", "--repetition-penalty", "1.3",
            *extra]


def test_rounds_are_printed_and_the_trace_saved(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    folder = tiny_llama_folder[1]
    path = tmp_path / "spec.json"
    code, out, err = run_cli(capsys, monkeypatch, main, decode_args(
        folder, "--strategy", "speculative", "--draft", f"model:{folder}", "--draft-tokens", "3", "--verify", "sample",
        "--temperature", "1.5", "--json", str(path)))
    assert code == 0, err
    trace = Trace.from_json(path.read_bytes())
    assert trace.rounds and len(trace.steps) == 10
    assert "acceptance alpha" in out and "K = 3 (fixed)" in out
    lines = [line for line in out.splitlines() if line[:5].strip().isdigit() and "->" in line]
    rounds_printed = [line for line in lines if "(corrected)" in line or "(bonus)" in line]
    assert len(rounds_printed) == len(trace.rounds)
    # the same model as its own draft: p == q, so every draft is kept and every round ends with a bonus
    assert all(r.next_kind == "bonus" for r in trace.rounds)


@pytest.mark.parametrize("extra,named", [
    (("--strategy", "speculative", "--draft", "early-exit:1", "--draft-tokens", "0"), "draft_tokens"),
    (("--strategy", "speculative", "--draft", "early-exit:2"), "choose 1 to 1"),
    (("--strategy", "speculative", "--draft", "early-exit:x"), "whole number"),
    (("--strategy", "speculative"), "is not a draft"),
    (("--strategy", "beam", "--draft", "early-exit:1"), "beam search keeps several"),
    (("--strategy", "soft", "--draft", "prompt-lookup:2"), "soft decoding feeds back vectors"),
    (("--strategy", "speculative", "--draft", "early-exit:1", "--verify", "maybe"), "verify"),
])
def test_bad_values_get_one_line_and_status_2(capsys, monkeypatch, tiny_llama_folder, extra, named):
    code, out, err = run_cli(capsys, monkeypatch, main, decode_args(tiny_llama_folder[1], *extra))
    assert code == 2 and not out
    assert err.startswith("error: ") and err.count("\n") == 1 and named in err, err
    assert "Traceback" not in err


def test_a_draft_with_another_vocabulary_is_one_line(capsys, monkeypatch, tiny_llama_folder, other_vocabulary):
    code, out, err = run_cli(capsys, monkeypatch, main, decode_args(
        tiny_llama_folder[1], "--strategy", "speculative", "--draft", f"model:{other_vocabulary}"))
    assert code == 2 and err.count("\n") == 1 and "share the target's vocabulary" in err, err
    assert "320" in err and "300" in err
