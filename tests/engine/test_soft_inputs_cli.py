"""The feed-back rules on the command line and in trace files: flags, the --json trace's per-step fields, and
hostile files refused with one sentence naming the problem."""
from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

from cli_helpers import assert_one_error_line, cli_in_process
from engine import DecodeConfig, Trace, TraceFormatError, decode
from engine.soft_inputs.cli import format_fed
from figures.soft_inputs import measure_grid
from test_trace_mutations import damage, read, render_everything

PROMPT = ["--prompt", "The capital of France is"]


@pytest.mark.parametrize("args", [
    ["--strategy", "soft-thinking", "--soft-top-k", "3", "--cold-stop", "20:2", "--soft-gumbel", "0.5"],
    ["--strategy", "mixture-of-inputs", "--moi-beta", "2"],
    ["--strategy", "hidden-state"],
    ["--strategy", "multi-token-mean", "--mtm-k", "3"],
])
def test_json_traces_carry_fed_ids_weights_and_the_emitted_id(capsys, monkeypatch, tiny_llama_folder, args):
    lm, folder = tiny_llama_folder
    result = cli_in_process(capsys, monkeypatch, *PROMPT, *args, "--max-new-tokens", "4", "--json", "-",
                            model=folder)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for step in data["steps"]:
        assert step["emitted_id"] == step["chosen_ids"][0]
        assert len(step["fed_ids"]) == len(step["fed_weights"]) <= 20
        assert step["fed_weights"] == sorted(step["fed_weights"], reverse=True)
        assert (step["fed_ids"] == []) == (args[1] == "hidden-state")
    config = DecodeConfig.from_dict(data["config"])
    again = decode(lm, "The capital of France is", config)        # the file's settings replay the same run
    assert [s.emitted_id for s in again.steps] == [s["emitted_id"] for s in data["steps"]]
    Trace.from_json(result.stdout)


def test_the_table_lists_what_each_step_fed(capsys, monkeypatch, tiny_llama_folder):
    _, folder = tiny_llama_folder
    result = cli_in_process(capsys, monkeypatch, *PROMPT, "--strategy", "soft-thinking", "--cold-stop", "20:2",
                            "--max-new-tokens", "3", model=folder)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("step  kind"))
    rows = lines[header + 1:header + 4]
    assert [row.split()[1] for row in rows] == ["mixture", "id", "id"]
    assert "*" in rows[1] and "*" not in rows[0]


def test_infinite_beta_round_trips_through_the_json_trace(capsys, monkeypatch, tiny_llama_folder):
    _, folder = tiny_llama_folder
    result = cli_in_process(capsys, monkeypatch, *PROMPT, "--strategy", "mixture-of-inputs", "--moi-beta", "inf",
                            "--max-new-tokens", "2", "--json", "-", model=folder)
    data = json.loads(result.stdout)
    assert data["config"]["moi_beta"] == "inf"
    assert Trace.from_json(result.stdout).config.moi_beta == math.inf


@pytest.mark.parametrize("args, words", [
    (["--strategy", "soft-thinking", "--soft-top-k", "0"], ["--soft-top-k", "between 1 and"]),
    (["--strategy", "soft-thinking", "--cold-stop", "0.1"], ["--cold-stop", "'0.1' is not TAU:L"]),
    (["--strategy", "soft-thinking", "--cold-stop", "0.1:-3"], ["--cold-stop", "L must be between 1"]),
    (["--strategy", "soft-thinking", "--soft-gumbel", "-1"], ["--soft-gumbel", "0 (off)"]),
    (["--strategy", "soft-thinking", "--soft-dirichlet", "nan"], ["--soft-dirichlet", "finite"]),
    (["--strategy", "mixture-of-inputs", "--moi-beta", "-0.5"], ["--moi-beta", "or inf"]),
    (["--strategy", "mixture-of-inputs", "--moi-beta", "-inf"], ["--moi-beta"]),
    (["--strategy", "multi-token-mean", "--mtm-k", "2000"], ["--mtm-k", "1,024"]),
    (["--strategy", "soft-thinking", "--sampler-order", "llama.cpp"], ["--sampler-order", "transformers order"]),
    (["--strategy", "soft-thinkin"], ["strategy", "soft-thinking", "multi-token-mean"]),
])
def test_bad_flags_get_one_line_naming_the_flag(capsys, monkeypatch, args, words):
    assert_one_error_line(cli_in_process(capsys, monkeypatch, *PROMPT, *args), *words)


def test_a_served_model_refuses_the_rules():
    from engine.served.decode import served_decode
    from engine.served.transport import ServedError

    with pytest.raises(ServedError, match="feeds a vector back"):
        served_decode(None, "x", DecodeConfig(strategy="mixture-of-inputs"))


# ---- hostile trace files ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base(llama):
    return decode(llama, "The capital of France is",
                  DecodeConfig(strategy="soft-thinking", max_new_tokens=4, cold_stop="20:2")).to_dict()


def damaged(data, change):
    data = copy.deepcopy(data)
    change(data)
    return json.dumps(data)


def _step(data, i=1):
    return data["steps"][i]


@pytest.mark.parametrize("change, words", [
    (lambda d: _step(d).__setitem__("emitted_id", _step(d)["chosen_ids"][0] + 1), "is not the chosen token"),
    (lambda d: _step(d).__setitem__("emitted_id", None), "emitted_id and its fed input"),
    (lambda d: _step(d, 0).__setitem__("fed_weights", _step(d, 0)["fed_weights"][::-1]), "most weight first"),
    (lambda d: _step(d, 0)["fed_ids"].__setitem__(0, 10**9), "outside the vocabulary"),
    (lambda d: _step(d, 0)["fed_ids"].__setitem__(1, _step(d, 0)["fed_ids"][0]), "listed twice"),
    (lambda d: _step(d, 0)["fed_weights"].pop(), "fed_ids but"),
    (lambda d: _step(d, 0).__setitem__("fed_ids", list(range(25))) or
     _step(d, 0).__setitem__("fed_weights", [0.01] * 25), "more than 20"),
    (lambda d: _step(d, 0).__setitem__("fed_weights", [0.9] * len(_step(d, 0)["fed_ids"])), "sum to"),
    (lambda d: _step(d, 0)["fed_weights"].__setitem__(0, 1.5), "between 0 and 1"),
    (lambda d: _step(d, 0)["fed_weights"].__setitem__(0, None), "weight must be a finite number"),
    (lambda d: _step(d, 0)["fed_weights"].__setitem__(0, "0.5"), "expected a number"),
    (lambda d: _step(d, 0)["fed"].__setitem__("kind", "<b>soup</b>"), "is not one of mixture, id, hidden"),
    (lambda d: _step(d, 0)["fed"].__setitem__("kind", "hidden"), "lists no tokens"),
    (lambda d: _step(d, 0)["fed"].__setitem__("participation", None), "only a fed hidden state"),
    (lambda d: _step(d, 0)["fed"].__setitem__("participation", 0.2), "participation"),
    (lambda d: _step(d, 0)["fed"].__setitem__("emitted_cosine", 3.0), "between -1 and 1"),
    (lambda d: _step(d, 0)["fed"].__setitem__("norm", -1.0), "norm must be at least 0"),
    (lambda d: _step(d, 0)["fed"].__setitem__("low_steps", 99), "low_steps"),
    (lambda d: _step(d, 0)["fed"].__setitem__("cold_stop", True), "fires only at its L-th"),
    (lambda d: _step(d, 0)["fed"].__setitem__("cold_stop", "yes"), "expected true or false"),
    (lambda d: _step(d, 0)["fed"]["nearest"].__setitem__(0, {"token_id": -4, "text": "x", "value": 0.5}),
     "outside the vocabulary"),
    (lambda d: _step(d, 0)["fed"].pop("entropy"), "'entropy' is missing"),
    (lambda d: d["config"].__setitem__("strategy", "greedy"), "only soft-thinking"),
    (lambda d: d["config"].__setitem__("moi_beta", "-inf"), "moi_beta"),
    (lambda d: d["config"].__setitem__("cold_stop", "1:x"), "cold_stop"),
])
def test_a_hostile_file_is_refused_with_one_sentence(base, change, words):
    with pytest.raises(TraceFormatError) as caught:
        Trace.from_json(damaged(base, change))
    message = str(caught.value)
    assert words in message and "\n" not in message and len(message) < 400, message


def test_the_undamaged_file_reads(base):
    trace = Trace.from_json(json.dumps(base))
    assert trace.steps[1].fed.cold_stop and trace.steps[1].fed_ids == [trace.steps[1].emitted_id]


# ---- damaged anywhere: refused with a sentence, or read and shown ----------------------------------
@pytest.fixture(scope="module")
def hidden_base(llama):
    return decode(llama, "The capital of France is", DecodeConfig(strategy="hidden-state", max_new_tokens=3)).to_dict()


LABELS = {key: key for key in ("cosine", "norm_ratio", "participation", "entropy", "step", "departure", "cold_stop",
                               "title")}


@pytest.mark.parametrize("which", ["soft-thinking", "hidden-state"])
@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_damaged_trace_is_refused_with_a_sentence_or_shows_everywhere(base, hidden_base, which, data):
    trace = read(data.draw(damage(base if which == "soft-thinking" else hidden_base)))
    if trace is not None:
        render_everything(trace)
        measure_grid([("lane", trace)], LABELS, {"lane": 0}, cold_stop=0.1, selected=0)
        format_fed(trace, repr)
