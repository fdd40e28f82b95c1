"""Running a command-line entry point inside a test: its exit status, stdout and stderr."""
from __future__ import annotations

import os
import subprocess
import sys

from tiny_models import ROOT


def run_cli(capsys, monkeypatch, main, argv):
    """main(argv) offline; (exit status, stdout, stderr), with a SystemExit read as its status."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli_in_process(capsys, monkeypatch, *args, model=None):
    """`decode ARGS` through the CLI's main() in this process (a real process pays ~10 s of imports)."""
    from engine.cli.main import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = ["decode", *args] + (["--model", str(model)] if model is not None else [])
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return Result(code, out.out, out.err)


def decode_process(*args, model=None, timeout=600):
    """`python -m engine decode ARGS` as a real process, offline: what a user's terminal sees."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONIOENCODING="utf-8")
    cmd = [sys.executable, "-m", "engine", "decode", *args]
    if model is not None:
        cmd += ["--model", str(model)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def assert_one_error_line(result, *words):
    """Status 2 and one line on stderr, `error: ...`, naming each of `words`; no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0], lines[0]
