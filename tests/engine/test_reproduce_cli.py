"""`python -m engine reproduce`: one line per run, the JSON with exactly the documented names, and every bad flag
refused with one line and status 2 before any model loads (run in this process on a tiny model in a folder)."""
from __future__ import annotations

import json

import pytest

from cli_helpers import run_cli
from engine.cli.main import main

PROMPT = "The capital of France is"


def test_runs_are_printed_and_the_json_has_the_documented_names(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    folder = tiny_llama_folder[1]
    path = tmp_path / "runs.json"
    code, out, err = run_cli(capsys, monkeypatch, main, [
        "reproduce", "--model", folder, "--prompt", PROMPT, "--max-new-tokens", "6", "--batch-sizes", "1,2,3",
        "--fill", "padded", "--verify", "2", "--json", str(path)])
    assert code == 0, err
    report = json.loads(path.read_text())
    assert set(report) == {"runs", "first_divergence"}
    assert len(report["runs"]) == 5 == len(report["first_divergence"])       # alone, 1, 2, 3, verify
    for run in report["runs"]:
        assert {"batch_size", "fill", "prefill", "dtype", "invariant", "token_ids", "logits_sha256", "steps",
                "first_divergence"} <= set(run)
        assert len(run["steps"]) == len(run["token_ids"])
        for step in run["steps"]:
            assert {"max_abs_delta", "margin", "top2_ids", "fragile"} <= set(step)
    assert [r["batch_size"] for r in report["runs"]] == [1, 1, 2, 3, 1]
    assert report["runs"][0]["first_divergence"] is None
    assert report["runs"][1]["logits_sha256"] == report["runs"][0]["logits_sha256"]      # alone twice: equal
    lines = out.splitlines()
    assert any(line.startswith("alone again") and "identical" in line for line in lines)
    assert any(line.startswith("batch of 3") for line in lines) and "verify 2" in out
    assert "runs written to" in err


def test_json_to_stdout_is_the_json_alone(capsys, monkeypatch, tiny_llama_folder):
    code, out, err = run_cli(capsys, monkeypatch, main, [
        "reproduce", "--model", tiny_llama_folder[1], "--prompt", PROMPT, "--max-new-tokens", "3", "--batch-sizes",
        "2", "--dtype", "bfloat16", "--invariant", "--json", "-"])
    assert code == 0, err
    report = json.loads(out)
    assert [r["dtype"] for r in report["runs"]] == ["bfloat16"] * 2 and report["runs"][1]["invariant"] is True
    assert report["runs"][1]["logits_sha256"] == report["runs"][0]["logits_sha256"]


@pytest.mark.parametrize("extra,named", [
    (["--batch-sizes", "1,2,65"], "--batch-sizes"), (["--batch-sizes", "1,x"], "--batch-sizes"),
    (["--batch-sizes", ""], "--batch-sizes"), (["--batch-sizes", "1,2,3,4,5,6,7,8,9"], "--batch-sizes"),
    (["--batch-sizes", "2,2"], "--batch-sizes"), (["--max-new-tokens", "0"], "--max-new-tokens"),
    (["--max-new-tokens", "257"], "--max-new-tokens"), (["--max-new-tokens", "ten"], "--max-new-tokens"),
    (["--prefill", "chunked:0"], "--prefill"), (["--prefill", "chunked:x"], "--prefill"),
    (["--prefill", "halves"], "--prefill"), (["--fill", "zeros"], "--fill"), (["--dtype", "float16"], "--dtype"),
    (["--verify", "17"], "--verify"), (["--verify", "-1"], "--verify"), (["--temperature", "-0.5"], "--temperature"),
    (["--temperature", "inf"], "--temperature"), (["--seed", "-1"], "--seed"),
    (["--json", "/no/such/folder/x.json"], "--json")])
def test_bad_flags_get_one_line_and_status_2(capsys, monkeypatch, extra, named):
    code, out, err = run_cli(capsys, monkeypatch, main, ["reproduce", "--prompt", PROMPT, *extra])
    assert code == 2 and out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], err
    assert "Traceback" not in err


def test_an_empty_prompt_is_one_line(capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, main, ["reproduce", "--prompt", "   "])
    assert code == 2 and err.startswith("error: --prompt: is empty")
