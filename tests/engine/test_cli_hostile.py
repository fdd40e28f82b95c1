"""The command line against hostile input: bytes that are not UTF-8, a named pipe nobody writes to,
a device given as a model, a --json path that cannot be written, a damaged model cache.

Each gives exit status 2 and one `error:` line (or works), in this process on the tiny Llama;
one case runs a real process, since only a real argv can carry bytes that are not UTF-8.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

import engine.cli.main as cli
import engine.model
import engine.cli.output
import hostile_traces
from engine import ConfigError, DecodeConfig, Trace
from engine.grammar.constrain import parse_schema
from engine import decode
from cli_helpers import Result, assert_one_error_line, cli_in_process
from tiny_models import ROOT


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


# ---- prompts that are not text ---------------------------------------------------------------
def test_an_argument_byte_that_is_not_utf8_is_named(capsys, monkeypatch, tiny_llama_folder, loads):
    # Python keeps the byte 0xE9 of a Latin-1 "café" as the lone surrogate U+DCE9 (surrogateescape)
    result = cli_in_process(capsys, monkeypatch, "--prompt", "caf\udce9", model=tiny_llama_folder[1])
    assert_one_error_line(result, "--prompt", "not UTF-8", "0xE9", "character 4")
    assert loads == []


def test_a_lone_surrogate_is_named(capsys, monkeypatch, tiny_llama_folder, loads):
    result = cli_in_process(capsys, monkeypatch, "--prompt", "smile \ud83d please", model=tiny_llama_folder[1])
    assert_one_error_line(result, "--prompt", "character 7", "\\ud83d", "UTF-16")
    assert loads == []


def test_the_engine_refuses_a_lone_surrogate_by_name(llama):
    with pytest.raises(ConfigError) as info:
        decode(llama, "half an emoji \ud83d", DecodeConfig(max_new_tokens=2))
    assert info.value.param == "prompt" and "character 15" in str(info.value)


def test_latin1_bytes_in_a_real_argv_give_one_line(tiny_llama_folder):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LC_ALL="C.UTF-8")
    cmd = [sys.executable.encode(), b"-m", b"engine", b"decode", b"--prompt", "café".encode("latin-1"),
           b"--model", tiny_llama_folder[1].encode()]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=600)
    err = done.stderr.decode("utf-8")
    assert done.returncode == 2 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines() == [err.strip()]
    assert err.startswith("error: --prompt: is not UTF-8 text (byte 0xE9 at character 4)"), err


# ---- a named pipe ------------------------------------------------------------------------------
def test_a_named_pipe_nobody_writes_to_is_given_up_with_a_message(capsys, monkeypatch, tmp_path, tiny_llama_folder,
                                                                 loads):
    fifo = tmp_path / "prompt.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(engine.cli.output, "PIPE_WAIT_S", 0.3)
    result = cli_in_process(capsys, monkeypatch, "--prompt-file", str(fifo), model=tiny_llama_folder[1])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"waiting up to 0.3 s for text on {fifo} (a named pipe)"
    assert lines[-1] == f"error: --prompt-file: {fifo} is a named pipe and nothing was written to it within 0.3 s"
    assert loads == []


def test_a_named_pipe_with_a_writer_gives_the_prompt(capsys, monkeypatch, tmp_path, tiny_llama_folder):
    fifo = tmp_path / "prompt.fifo"
    os.mkfifo(fifo)
    text = "The capital of France is\nParis 😀"

    def writer():
        time.sleep(0.2)                   # the reader is waiting by then
        with open(fifo, "w", encoding="utf-8") as fh:
            fh.write(text)

    thread = threading.Thread(target=writer)
    thread.start()
    out = tmp_path / "t.json"
    result = cli_in_process(capsys, monkeypatch, "--prompt-file", str(fifo), "--max-new-tokens", "2",
                            "--json", str(out), model=tiny_llama_folder[1])
    thread.join()
    assert result.returncode == 0, result.stderr[-2000:]
    assert Trace.from_json(out.read_bytes()).prompt == text


# ---- a device as the model, a --json path that cannot be written --------------------------------------
@pytest.mark.parametrize("model", ["/dev/zero", "README.md"])
def test_a_file_given_as_the_model_is_called_a_file(capsys, monkeypatch, model):
    monkeypatch.chdir(ROOT)
    result = cli_in_process(capsys, monkeypatch, "--prompt", "Paris", model=model)
    assert_one_error_line(result, f"'{model}' is a file, not a model folder")


@pytest.mark.parametrize("target, words", [
    ("{tmp}/no/such/folder/t.json", ["--json", "does not exist"]),
    ("{tmp}", ["--json", "is a folder"]),
])
def test_a_json_path_that_cannot_be_written_is_refused_before_the_decode(capsys, monkeypatch, tmp_path,
                                                                         tiny_llama_folder, loads, target, words):
    path = target.format(tmp=tmp_path)
    result = cli_in_process(capsys, monkeypatch, "--prompt", "Paris", "--json", path, model=tiny_llama_folder[1])
    assert_one_error_line(result, path, *words)
    assert loads == [], "the model was loaded (and the decode run) before the --json path was checked"


# ---- a damaged model cache ------------------------------------------------------------------------
def test_a_damaged_cache_is_rebuilt_and_the_cli_says_so(capsys, monkeypatch, fake_bundled):  # noqa: F811
    target, calls = fake_bundled
    assert cli_in_process(capsys, monkeypatch, "--prompt", "Paris", "--max-new-tokens", "2").returncode == 0
    (target / "model.safetensors").write_bytes(b"")
    result = cli_in_process(capsys, monkeypatch, "--prompt", "Paris", "--max-new-tokens", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "damaged" in result.stderr and "model.safetensors" in result.stderr and "rebuilding" in result.stderr
    assert calls == [1, 1]


# ---- `lens` has the same checks as `decode` ----------------------------------------------------------
def lens_in_process(capsys, monkeypatch, *args):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    capsys.readouterr()
    try:
        code = cli.main(["lens", *args])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return Result(code, out.out, out.err)


@pytest.mark.parametrize("prompt, words", [("caf\udce9", ["--prompt", "not UTF-8", "0xE9", "character 4"]),
                                           ("smile \ud83d please", ["--prompt", "character 7", "UTF-16"])])
def test_lens_names_a_prompt_that_is_not_text_before_loading(capsys, monkeypatch, tiny_llama_folder, loads,
                                                             prompt, words):
    result = lens_in_process(capsys, monkeypatch, "--prompt", prompt, "--model", tiny_llama_folder[1])
    assert_one_error_line(result, *words)
    assert loads == [], "the model was loaded for a prompt that could be refused first"


def test_lens_rebuilds_a_damaged_cache_and_says_so(capsys, monkeypatch, fake_bundled):  # noqa: F811
    target, calls = fake_bundled
    assert lens_in_process(capsys, monkeypatch, "--prompt", "Paris").returncode == 0
    (target / "model.safetensors").write_bytes(b"")
    result = lens_in_process(capsys, monkeypatch, "--prompt", "Paris")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "damaged" in result.stderr and "model.safetensors" in result.stderr and "rebuilding" in result.stderr
    assert calls == [1, 1]
    assert "layer" in result.stdout


# ---- constrained and speculative decoding: names, flags and schemas ------------------------------------
LONG_NAME = "m" * 256          # one byte more than a file name may be


@pytest.mark.parametrize("args, words", [
    (["--model", LONG_NAME], ["model: a model name of 256 bytes", "at most 255 bytes"]),
    (["--strategy", "speculative", "--draft", f"model:{LONG_NAME}"],
     ["draft: a model name of 256 bytes", "at most 255 bytes"]),
    (["--regex", "caf\udce9"], ["--regex", "not UTF-8", "0xE9", "character 4"]),
    (["--choices", "yes,caf\udce9"], ["--choices", "not UTF-8", "0xE9", "character 8"]),
    (["--regex", "smile \ud83d"], ["--regex", "character 7", "UTF-16"]),
])
def test_a_hostile_flag_gives_one_line(capsys, monkeypatch, args, words):
    result = cli_in_process(capsys, monkeypatch, "--prompt", "The capital of France is", *args)
    assert_one_error_line(result, *words)


@pytest.mark.parametrize("name", list(hostile_traces.schema_cases("http://127.0.0.1:9")))
def test_a_hostile_schema_file_gives_the_same_line_as_the_engine(capsys, monkeypatch, tmp_path, name):
    schema, words = hostile_traces.schema_cases("http://127.0.0.1:9")[name]
    path = tmp_path / "schema.json"
    path.write_text(hostile_traces.schema_text(schema))
    result = cli_in_process(capsys, monkeypatch, "--prompt", "The capital of France is", "--json-schema", str(path))
    with pytest.raises(ConfigError) as info:
        parse_schema(hostile_traces.schema_text(schema))
    assert_one_error_line(result, words, str(info.value))
