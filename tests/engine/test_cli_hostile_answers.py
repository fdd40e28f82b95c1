"""`python -m engine answers` against flags at and past their bounds: seeds past 64 bits, a sampler that gives a
strategy's answer probability 0, a --json file nobody may write, beam widths that cost more than a request may
take, a prompt that leaves no room for the depth; and the answers file read back (a byte order mark, its size
named as what it is). Each refusal is one `error:` line before the model loads; each file written opens again.
"""
from __future__ import annotations

import json
import math
import os
import stat

import pytest

import engine.model
from cli_helpers import Result, assert_one_error_line, run_cli
from engine.answers.record import from_json
from engine.config import DecodeConfig
from engine.errors import ConfigError, TraceFormatError

pytestmark = [pytest.mark.tiny, pytest.mark.cli]
PROMPT = "The capital of"


@pytest.fixture
def loads(monkeypatch):
    """Names the CLI asked to load (it must not load a model for input it can refuse first)."""
    names = []
    real = engine.model.load_model

    def spy(name=None, progress=None, **placement):
        names.append(name)
        return real(name, progress=progress, **placement)

    monkeypatch.setattr(engine.model, "load_model", spy)
    return names


def answers(capsys, monkeypatch, folder, *args, prompt=("--prompt", PROMPT)) -> Result:
    from engine.cli.main import main

    return Result(*run_cli(capsys, monkeypatch, main, ["answers", *prompt, "--model", folder, *args]))


# ---- seeds -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [2**64, 2**63, -1, -2**63 - 1])
def test_a_seed_past_64_bits_is_refused_before_the_model_loads(capsys, monkeypatch, tiny_llama_folder, loads, seed):
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--samples", "4", "--seed", str(seed), "--depth", "2")
    assert_one_error_line(result, "--seed", "0 to 2**63 - 1")
    assert loads == []


def test_the_largest_seed_runs_and_its_file_opens_again(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    target = tmp_path / "run.json"
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--samples", "4", "--seed", str(2**63 - 1),
                     "--depth", "2", "--budget", "8", "--json", str(target))
    assert result.returncode == 0, result.stderr
    run = from_json(target.read_bytes())
    assert run.seed == run.samples.seed == 2**63 - 1


def test_one_bound_for_a_seed_everywhere_it_is_read(written_file):
    """The decode's settings, the answers file and the CLI share MAX_SEED: 2**63 - 1, the most a signed 64-bit
    generator seed holds."""
    from engine.config import MAX_SEED

    assert MAX_SEED == 2**63 - 1
    assert DecodeConfig(seed=MAX_SEED).validate().seed == MAX_SEED
    with pytest.raises(ConfigError, match="seed"):
        DecodeConfig(seed=MAX_SEED + 1).validate()
    data = json.loads(written_file.read_text())
    for place in ("run", "samples"):
        lie = json.loads(json.dumps(data))
        (lie if place == "run" else lie["samples"])["seed"] = 2**63
        with pytest.raises(TraceFormatError, match="seed"):
            from_json(json.dumps(lie))


# ---- an answer the sampler never gives -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cut_run(tiny_llama_folder, tmp_path_factory):
    """--top-k 1: the sampler's distribution is all on greedy's path, so every beam that leaves it lands on an
    answer of probability exactly 0 (greedy and beam search rank by the model's own scores)."""
    from engine.cli.main import main

    target = tmp_path_factory.mktemp("cut") / "run.json"
    argv = ["answers", "--prompt", PROMPT, "--model", tiny_llama_folder[1], "--depth", "3", "--budget", "12",
            "--distribution", "sampler", "--top-k", "1", "--beams", "1,2,4", "--samples", "3", "--json", str(target)]
    return main(argv), target


def test_an_answer_of_probability_zero_is_written_as_null_and_read_back(cut_run, capsys):
    code, target = cut_run
    assert code == 0
    data = json.loads(target.read_text())          # strict JSON: no -Infinity, no NaN
    greedy = data["landings"][0]
    assert greedy[0] == "greedy" and greedy[4] == 0.0         # top-k 1: greedy's path has all the mass
    off_path = [x for x in data["landings"][1:] if x[1] != greedy[1]]
    assert off_path, "no beam left greedy's path; the case needs one"
    assert all(x[4] is None for x in off_path)
    run = from_json(target.read_text())
    assert [x.logprob for x in run.landings if x.token_ids != tuple(greedy[1])] == [-math.inf] * len(off_path)


def test_an_answer_of_probability_zero_is_printed_as_zero(capsys, monkeypatch, tiny_llama_folder):
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--depth", "3", "--budget", "12", "--distribution",
                     "sampler", "--top-k", "1", "--beams", "1,2,4")
    assert result.returncode == 0, result.stderr
    assert "0 (the sampler cuts one of its tokens)" in result.stdout
    assert "inf" not in result.stdout and "nan" not in result.stdout


# ---- --json nobody may write -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def written_file(tiny_llama_folder, tmp_path_factory):
    from engine.answers import TreeSettings
    from engine.answers.record import to_json
    from engine.answers.run import explore

    path = tmp_path_factory.mktemp("written") / "run.json"
    path.write_text(to_json(explore(tiny_llama_folder[0], PROMPT, TreeSettings(depth=3, budget=20, branch=3),
                                    samples=4, seed=7)), encoding="utf-8")
    return path


def test_a_read_only_json_file_is_refused_and_kept(capsys, monkeypatch, tiny_llama_folder, loads, tmp_path):
    target = tmp_path / "kept.json"
    target.write_text("the user's own file")
    target.chmod(0o444)
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--depth", "2", "--json", str(target))
    assert_one_error_line(result, "--json", str(target), "read-only")
    assert target.read_text() == "the user's own file" and loads == []


def test_a_read_only_folder_is_refused(capsys, monkeypatch, tiny_llama_folder, loads, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--depth", "2", "--json", str(folder / "r.json"))
        assert_one_error_line(result, "--json", "read-only")
        assert not (folder / "r.json").exists() and loads == []
    finally:
        folder.chmod(0o755)


def test_a_private_file_stays_private_when_written_again(tmp_path):
    from engine.cli.output import write_file

    target = tmp_path / "private.json"
    target.write_text("old")
    target.chmod(0o600)
    write_file(str(target), "new")
    assert target.read_text() == "new" and stat.S_IMODE(os.stat(target).st_mode) == 0o600


# ---- beam widths -----------------------------------------------------------------------------------------------------
def test_beams_past_the_step_budget_are_refused_naming_the_cost(capsys, monkeypatch, tiny_llama_folder, loads):
    # greedy + 2 + 4 + 8 + 16 + 32 = 63 beams, each decoding depth + 1 = 65 steps: 4,095 beam steps
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--beams", "1,2,4,8,16,32", "--depth", "64")
    assert_one_error_line(result, "--beams", "4,095 beam steps", "1,024", "65 steps", "63 beams")
    assert loads == []


def test_beams_within_the_budget_run(capsys, monkeypatch, tiny_llama_folder):
    monkeypatch.setenv("DECODESCOPE_COMPARE_STEPS", "15")      # greedy + 4 beams over 3 steps: exactly 15
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--beams", "1,4", "--depth", "2", "--budget", "8")
    assert result.returncode == 0, result.stderr
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--beams", "1,4", "--depth", "3", "--budget", "8")
    assert_one_error_line(result, "--beams", "20 beam steps", "15")


@pytest.mark.parametrize("beams, width", [("1,1,1,1,1,1,1", "1"), ("4,2,4", "4")])
def test_a_repeated_width_is_named_as_a_repeat(capsys, monkeypatch, tiny_llama_folder, loads, beams, width):
    result = answers(capsys, monkeypatch, tiny_llama_folder[1], "--beams", beams)
    assert_one_error_line(result, "--beams", f"the width {width} is given more than once")
    assert "1 to 6 widths" not in result.stderr and loads == []


# ---- a prompt near the context -----------------------------------------------------------------------------------
def test_a_prompt_that_leaves_no_room_for_the_depth_names_depth(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    lm, folder = tiny_llama_folder
    text = "The capital of France is Paris. " * 14
    used = len(lm.tokenizer(text)["input_ids"])
    context = lm.model.config.max_position_embeddings
    room = context - used - 1                        # the answer's tokens and its end after the prompt
    assert 1 <= room < 64
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(text, encoding="utf-8")
    result = answers(capsys, monkeypatch, folder, "--depth", str(room + 1), prompt=("--prompt-file", str(prompt)))
    assert_one_error_line(result, "--depth", f"at most {room}", f"({used:,} tokens)", f"context of {context:,}")
    assert "max_new_tokens" not in result.stderr
    result = answers(capsys, monkeypatch, folder, "--depth", str(room), "--budget", "4", "--beams", "1",
                     prompt=("--prompt-file", str(prompt)))
    assert result.returncode == 0, result.stderr


# ---- the answers file read back -------------------------------------------------------------------------------------
def test_an_answers_file_with_a_byte_order_mark_opens(written_file):
    plain = from_json(written_file.read_bytes())
    assert from_json(b"\xef\xbb\xbf" + written_file.read_bytes()) == plain
    assert from_json("\ufeff" + written_file.read_text(encoding="utf-8")) == plain


def test_an_answers_file_over_the_limit_is_called_an_answers_file(written_file):
    text = written_file.read_bytes()
    payload = text + b" " * (20_000_001 - len(text))
    with pytest.raises(TraceFormatError) as info:
        from_json(payload)
    assert str(info.value) == "answers file is 20,000,001 bytes, over 20,000,000; the limit is 20 MB"
