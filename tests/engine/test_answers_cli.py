"""`python -m engine answers` on the tiny Llama: the ranked answers and the ledger printed, the JSON written
and read back whole, bad settings as one line, and a file that lies about its masses refused."""
from __future__ import annotations

import json
import math

import pytest

from cli_helpers import run_cli
from engine.answers.record import from_json
from engine.errors import TraceFormatError

pytestmark = [pytest.mark.tiny, pytest.mark.cli]


def answers(capsys, monkeypatch, folder, *args):
    from engine.cli.main import main

    return run_cli(capsys, monkeypatch, main, ["answers", "--prompt", "The capital of", "--model", folder, *args])


def test_prints_answers_and_a_ledger_that_adds_up(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    _, folder = tiny_llama_folder
    target = tmp_path / "run.json"
    code, out, err = answers(capsys, monkeypatch, folder, "--depth", "3", "--budget", "40", "--samples", "16",
                             "--beams", "1,3", "--json", str(target))
    assert code == 0, err
    labels = ("complete answers found", "open prefixes", "cut at the depth", "left out")
    ledger = [float(line.strip()[len(label):].split()[0]) for line in out.splitlines() for label in labels
              if line.strip().startswith(label)]
    assert len(ledger) == 4 and sum(ledger) == pytest.approx(1, abs=1e-5), out
    assert "greedy" in out and "beam 3" in out and "Good-Turing" in out
    run = from_json(target.read_text())
    # the printed probabilities are the file's answers, in the same order
    printed = [float(line.split()[1]) for line in out.splitlines() if line[:4].strip().isdigit()]
    assert printed == pytest.approx([a.prob for a in run.tree.answers[:len(printed)]], rel=1e-3)
    assert sum(o.count for o in run.samples.outcomes) == 16


@pytest.mark.parametrize("args,words", [
    (["--depth", "0"], ["--depth", "1 to 64"]),
    (["--budget", "999999"], ["--budget"]),
    (["--samples", "9999"], ["--samples"]),
    (["--beams", "1,x"], ["beams"]),
    (["--temperature", "0.5"], ["--distribution", "sampler"]),
    (["--distribution", "sampler", "--top-p", "1.5"], ["--top-p"]),
])
def test_bad_settings_are_one_line(capsys, monkeypatch, tiny_llama_folder, args, words):
    _, folder = tiny_llama_folder
    code, out, err = answers(capsys, monkeypatch, folder, *args)
    assert code == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture(scope="module")
def written(tiny_llama_folder, tmp_path_factory):
    from engine.answers import TreeSettings
    from engine.answers.record import to_json
    from engine.answers.run import explore

    lm, _ = tiny_llama_folder
    return json.loads(to_json(explore(lm, "The capital of", TreeSettings(depth=3, budget=30, branch=3), samples=8)))


def _lie(data, how):
    data = json.loads(json.dumps(data))
    how(data)
    return json.dumps(data)


@pytest.mark.parametrize("how,words", [
    (lambda d: d["nodes"][1].__setitem__(6, 0.9), "add up to"),                 # a left-out mass made up
    (lambda d: d["nodes"][2].__setitem__(0, 99), "parent 99"),
    (lambda d: d["nodes"][1].__setitem__(3, 0.5), "at most 0"),
    (lambda d: d["answers"][0].__setitem__(0, len(d["nodes"]) + 5), "not an expanded node"),
    (lambda d: d["settings"].__setitem__("depth", 10**9), "depth"),
    (lambda d: d.__setitem__("nodes", [[-1, -1, "", 0, True, 0, 0, 0, 0, None, None]] * 330_000), "more than"),
    (lambda d: d["samples"].__setitem__("n", 9), "add up to 9"),
    (lambda d: d.__setitem__("schema", "x"), "not a DecodeScope answers file"),
])
def test_a_file_that_lies_is_refused_with_one_line(written, how, words):
    with pytest.raises(TraceFormatError, match=words):
        from_json(_lie(written, how))


def test_a_file_read_back_gives_the_same_run(written):
    run = from_json(json.dumps(written))
    assert [a.logprob for a in run.tree.answers] == [a[1] for a in sorted(written["answers"], key=lambda a: -a[1])]
    assert run.tree.ledger.total == pytest.approx(1, abs=1e-9)
    assert all(math.isfinite(n.logprob) for n in run.tree.nodes)


@pytest.mark.parametrize("how,words", [
    (lambda d: d["nodes"][1].__setitem__(2, "x" * 1001), "1,001 characters"),
    (lambda d: d["settings"].__setitem__("budget", 2), "more than the budget"),
    (lambda d: d["settings"].__setitem__("branch", 1), "children each allow"),
])
def test_a_file_past_its_own_settings_is_refused(written, how, words):
    """A file's nodes are bounded by its own budget and branch, its texts by a token's length: a tree the
    figure would have to copy a long text into every descendant of is never built."""
    with pytest.raises(TraceFormatError, match=words):
        from_json(_lie(written, how))


def test_the_figure_builds_each_hover_text_bounded():
    """A prefix's hover text is its end, at most 200 characters, whatever its tokens hold."""
    from types import SimpleNamespace

    from engine.answers.tree import Prefix
    from figures.answers import path_text

    nodes = [Prefix(0, -1, -1, "", 0, 0.0, True)]
    for i in range(1, 65):
        nodes.append(Prefix(i, i - 1, 5, "y" * 999, i, -0.01 * i, True))
    tree = SimpleNamespace(nodes=nodes)
    assert len(path_text(tree, 64)) == 201 and path_text(tree, 64).startswith("…")
    assert path_text(SimpleNamespace(nodes=nodes[:2]), 1, limit=5000) == "y" * 999


def test_a_file_written_without_samples_opens_again(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    _, folder = tiny_llama_folder
    target = tmp_path / "run.json"
    code, _, err = answers(capsys, monkeypatch, folder, "--depth", "2", "--budget", "10", "--json", str(target))
    assert code == 0, err
    run = from_json(target.read_bytes())
    assert run.samples is None and [x.strategy for x in run.landings] == ["greedy", "beam 4"]


@pytest.mark.parametrize("seed", [str(2**63), str(2**64), "-1", str(-2**63 - 1)])
def test_a_seed_past_what_a_file_keeps_is_one_line(capsys, monkeypatch, tiny_llama_folder, seed):
    _, folder = tiny_llama_folder
    code, _, err = answers(capsys, monkeypatch, folder, "--samples", "2", "--seed", seed)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("error: --seed: must be a whole number from 0 to 2**63 - 1"), lines


def test_nothing_certified_names_the_setting_that_would_help(capsys, monkeypatch, tiny_llama_folder):
    """Depth 1, every prefix expanded: what bounds the answers is a child left out, which no budget reaches."""
    _, folder = tiny_llama_folder
    code, out, err = answers(capsys, monkeypatch, folder, "--depth", "1", "--budget", "50", "--branch", "2")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("certified:"))
    assert line.startswith("certified: none yet; the best answer found (") and "below a child left out" in line
    assert line.endswith("more --branch would keep it, more --budget never reaches it")
