"""Running a command-line entry point inside a test: its exit status, stdout and stderr."""
from __future__ import annotations


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
