"""The command line's own output against what can go wrong with it: a full disk, a closed standard output, a
pipe whose reader stopped, a named pipe nobody reads, a write that fails half-way; and the numbers and
addresses it is given that the sampler or the URL parser cannot use. Each ends in one `error:` line and exit
status 2, and a file is either written whole or left as it was.

The decodes come from a stand-in server (tests/hostile_servers.py, answering well) so that no model loads;
the one case that needs the sampler runs on the tiny Llama."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading

import pytest

import engine.cli.output
import hostile_servers as hs
from cli_helpers import run_cli
from engine import Trace
from engine.cli.main import main
from tiny_models import ROOT


@pytest.fixture
def server():
    running = hs.RawServer(hs.well_formed)
    yield running.url
    running.close()


def decode_args(url, *extra):
    return ["decode", "--prompt", "The capital of France is", "--server", url, "--max-new-tokens", "3", *extra]


def one_error_line(code, err, *words):
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    assert "Traceback" not in err and all(word in lines[0] for word in words), lines[0]


# ---- numbers and addresses --------------------------------------------------------------------------------
@pytest.mark.parametrize("args, param", [
    (["--strategy", "sample", "--temperature", "1e-320"], "temperature"),
    (["--strategy", "gumbel", "--tau", "1e-320"], "tau"),
    (["--strategy", "beam", "--num-beams", "2", "--length-penalty", "1e300"], "length_penalty"),
])
def test_a_float_the_sampler_cannot_use_is_named(capsys, monkeypatch, tiny_llama_folder, args, param):
    code, out, err = run_cli(capsys, monkeypatch, main, ["decode", "--prompt", "Paris is", "--max-new-tokens", "2",
                                                         "--model", tiny_llama_folder[1], *args])
    one_error_line(code, err, f"{param}: must be between")


@pytest.mark.parametrize("url", ["http://[::1", "http://::1]:8000", "http://[::1]]:8000", "http://[not-an-ip]:80",
                                 "http://[::1:8000"])
def test_a_malformed_ipv6_address_is_one_line(capsys, monkeypatch, url):
    code, out, err = run_cli(capsys, monkeypatch, main, decode_args(url))
    one_error_line(code, err, "server address")


# ---- standard output --------------------------------------------------------------------------------------
def test_a_full_disk_on_standard_output_is_one_line(capsys, monkeypatch, server):
    with capsys.disabled(), open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        err = []
        monkeypatch.setattr(sys, "stderr", _Lines(err))
        code = main(decode_args(server))
    one_error_line(code, "".join(err), "standard output", "No space left")


def test_a_pipe_whose_reader_left_is_one_line(capsys, monkeypatch, server):
    read, write = os.pipe()
    os.close(read)
    with capsys.disabled(), os.fdopen(write, "w") as pipe:
        monkeypatch.setattr(sys, "stdout", pipe)
        err = []
        monkeypatch.setattr(sys, "stderr", _Lines(err))
        code = main(decode_args(server))
    one_error_line(code, "".join(err), "standard output was closed")


def test_a_closed_standard_output_is_one_line(capsys, monkeypatch, server):
    monkeypatch.setattr(sys, "stdout", None)           # what Python makes of a closed fd 1
    code = main(decode_args(server))
    one_error_line(code, capsys.readouterr().err, "standard output is closed")


class _Lines:
    """A stand-in stderr that keeps what is written (capsys is off while stdout is a real file)."""

    def __init__(self, into):
        self.into = into

    def write(self, text):
        self.into.append(text)

    def flush(self):
        pass


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_real_processes_with_a_full_closed_or_abandoned_standard_output(server):
    """What only a real process shows: Python's own flush at exit must not add a second message."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    command = [sys.executable, "-m", "engine", *decode_args(server)]
    read, write = os.pipe()
    os.close(read)
    with open("/dev/full", "w") as full:
        runs = {"full": subprocess.Popen(command, stdout=full, stderr=subprocess.PIPE, text=True, env=env),
                "abandoned": subprocess.Popen(command, stdout=write, stderr=subprocess.PIPE, text=True, env=env),
                "closed": subprocess.Popen(["sh", "-c", 'exec "$@" >&-', "sh", *command], stderr=subprocess.PIPE,
                                           text=True, env=env)}
    os.close(write)
    words = {"full": "No space left", "abandoned": "standard output was closed", "closed": "standard output is closed"}
    for name, process in runs.items():
        _, err = process.communicate(timeout=600)
        one_error_line(process.returncode, err, words[name])


# ---- --json files and pipes -------------------------------------------------------------------------------
def test_json_to_a_named_pipe_nobody_reads_gives_up_then_one_with_a_reader_gets_it_whole(capsys, monkeypatch,
                                                                                            tmp_path, server):
    monkeypatch.setattr(engine.cli.output, "PIPE_WAIT_S", 0.3)
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    code, out, err = run_cli(capsys, monkeypatch, main, decode_args(server, "--json", str(fifo)))
    one_error_line(code, err, "--json", "named pipe", "0.3 s")

    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo, "rb").read()))
    reader.start()
    code, out, err = run_cli(capsys, monkeypatch, main, decode_args(server, "--json", str(fifo)))
    reader.join()
    assert code == 0
    assert [s.chosen_texts[0] for s in Trace.from_json(received[0]).steps] == [t for t, _ in hs.TOKENS]


def test_a_json_write_that_fails_half_way_leaves_the_old_file_and_no_part(capsys, monkeypatch, tmp_path, server):
    """The file size limit (RLIMIT_FSIZE) makes the write fail after 1,000 bytes, as a full disk would."""
    target = tmp_path / "trace.json"
    target.write_text("the trace from before\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # a failed write, not a killed process
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))
        code, out, err = run_cli(capsys, monkeypatch, main, decode_args(server, "--json", str(target)))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    one_error_line(code, err, "--json", "cannot write", str(target))
    assert target.read_text() == "the trace from before\n"
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]
