"""`python -m engine answers --mbr ...` on the tiny Llama: each utility's table printed, the JSON's `agreement`
object as documented, bad flags as one line before the model loads, and a file's agreement part checked whole."""
from __future__ import annotations

import json
import math

import pytest

from cli_helpers import run_cli
from engine.answers.agreement import AgreementSettings, agree
from engine.answers.record import from_json
from engine.errors import TraceFormatError

pytestmark = [pytest.mark.tiny, pytest.mark.cli]
FIELDS = {"token_ids", "text", "logprob", "lower", "upper", "estimate", "stderr"}


def answers(capsys, monkeypatch, folder, *args):
    from engine.cli.main import main

    return run_cli(capsys, monkeypatch, main, ["answers", "--prompt", "The capital of", "--model", folder, *args])


def test_prints_each_utility_and_writes_the_agreement_object(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    _, folder = tiny_llama_folder
    target = tmp_path / "run.json"
    code, out, err = answers(capsys, monkeypatch, folder, "--depth", "3", "--budget", "40", "--samples", "24",
                             "--mbr", "exact,text,chrf,edit", "--mbr-candidates", "6", "--json", str(target))
    assert code == 0, err
    data = json.loads(target.read_text())
    part = data["agreement"]
    assert list(part) == ["exact", "text", "chrf", "edit"]
    answers_found = sorted(data["answers"], key=lambda a: -a[1])
    for name, u in part.items():
        rows = u["candidates"]
        assert 1 <= len(rows) <= 6 and all(set(r) == FIELDS for r in rows)
        assert isinstance(u["certified"], bool) and 0 <= u["winner"] < len(rows) and math.isfinite(u["margin"])
        assert all(0 <= r["lower"] <= r["upper"] <= 1 for r in rows)
        assert f"utility: {name}" in out
    # raw exact match picks the mode: the file's most probable answer, with E = its p and nothing unknown
    exact = part["exact"]
    won = exact["candidates"][exact["winner"]]
    assert won["logprob"] == pytest.approx(answers_found[0][1])
    assert won["lower"] == won["upper"] == pytest.approx(math.exp(answers_found[0][1]))
    assert out.count("winner: ") == 4
    # the file reopens with its settings; every number is worked out again from its answers
    run = from_json(target.read_text())
    assert run.agreement == AgreementSettings(("exact", "text", "chrf", "edit"), 6)
    again = agree(run, run.agreement.utilities, run.agreement.limit)
    assert [r["lower"] for r in part["chrf"]["candidates"]] == pytest.approx(list(again.results["chrf"].lower))


def test_json_to_standard_output_carries_it(capsys, monkeypatch, tiny_llama_folder):
    _, folder = tiny_llama_folder
    code, out, err = answers(capsys, monkeypatch, folder, "--depth", "2", "--budget", "20", "--mbr", "text",
                             "--json", "-")
    assert code == 0, err
    part = json.loads(out)["agreement"]
    assert list(part) == ["text"] and part["text"]["candidates"][0]["estimate"] is None     # no samples


@pytest.mark.parametrize("args,words", [
    (["--mbr", "bleu"], ["--mbr", "'bleu' is not one of"]),
    (["--mbr", ","], ["--mbr", "give one or more"]),
    (["--mbr", "text", "--mbr-candidates", "0"], ["--mbr-candidates", "1 to 64"]),
    (["--mbr", "text", "--mbr-candidates", "65"], ["--mbr-candidates"]),
])
def test_bad_flags_are_one_line(capsys, monkeypatch, tiny_llama_folder, args, words):
    _, folder = tiny_llama_folder
    code, out, err = answers(capsys, monkeypatch, folder, "--model", "/nonexistent/never-loaded", *args)
    assert code == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture(scope="module")
def written(tiny_llama_folder):
    from dataclasses import replace

    from engine.answers import TreeSettings
    from engine.answers.record import to_json
    from engine.answers.run import explore

    lm, _ = tiny_llama_folder
    run = explore(lm, "The capital of", TreeSettings(depth=3, budget=30, branch=3), samples=8)
    return json.loads(to_json(replace(run, agreement=AgreementSettings(("text", "edit"), 4))))


def _lie(data, how):
    data = json.loads(json.dumps(data))
    how(data)
    return json.dumps(data)


def _first(d):
    return d["agreement"]["text"]["candidates"][0]


@pytest.mark.parametrize("how,words", [
    (lambda d: d.__setitem__("agreement", [1]), "expected an object"),
    (lambda d: d["agreement"].__setitem__("bleu", d["agreement"]["text"]), "'bleu' is not one of"),
    (lambda d: d.__setitem__("agreement", {}), "give 1 to 4"),
    (lambda d: d["agreement"]["text"].__setitem__("winner", 99), "winner"),
    (lambda d: d["agreement"]["text"].__setitem__("winner", True), "winner"),
    (lambda d: d["agreement"]["text"].__setitem__("limit", 10**9), "limit"),
    (lambda d: d["agreement"]["text"].__setitem__("limit", 1), "at most 1"),
    (lambda d: d["agreement"]["edit"].__setitem__("limit", 5), "different numbers of candidates"),
    (lambda d: d["agreement"]["text"].__setitem__("certified", "yes"), "certified"),
    (lambda d: d["agreement"]["text"].__setitem__("margin", 7), "margin"),
    (lambda d: _first(d).__setitem__("lower", 1.5), "from 0 to 1"),
    (lambda d: _first(d).update(lower=0.9, upper=0.1), "more than its upper bound"),
    (lambda d: _first(d).__setitem__("token_ids", [-1]), "token_ids"),
    (lambda d: _first(d).__setitem__("token_ids", list(range(65))), "token_ids"),
    (lambda d: _first(d).__setitem__("text", "x" * 64_001), "64,001 characters"),
    (lambda d: _first(d).__setitem__("logprob", 0.5), "at most 0"),
    (lambda d: _first(d).pop("upper"), "upper"),
])
def test_a_lying_agreement_part_is_refused_with_one_line(written, how, words):
    with pytest.raises(TraceFormatError, match=words) as caught:
        from_json(_lie(written, how))
    assert "\n" not in str(caught.value) and "agreement" in str(caught.value)


def test_a_file_without_the_part_reads_as_before(written):
    data = json.loads(json.dumps(written))
    del data["agreement"]
    assert from_json(json.dumps(data)).agreement is None
    assert from_json(json.dumps(written)).agreement == AgreementSettings(("text", "edit"), 4)
