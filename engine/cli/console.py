"""The `decodescope` command: `decodescope run` starts the app, every other command is the engine CLI.

`decodescope decode ...` runs what `python -m engine decode ...` runs; its help and usage lines name
`decodescope`, the command the user typed. The app is started in a child process
(`python -m streamlit run app.py`), so the engine itself never imports Streamlit.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app.py"


def run_app(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="decodescope run", description="Start the DecodeScope app.")
    parser.add_argument("--host", default="localhost",
                        help="address to listen on (default localhost, this machine only; 0.0.0.0 serves a room)")
    parser.add_argument("--port", type=int, default=8501, help="port to listen on (default 8501)")
    args, rest = parser.parse_known_args(argv)
    if not APP.is_file():
        print(f"error: the app file {APP} is missing; run decodescope from a checkout installed with "
              "`pip install -e .`", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.address", args.host,
               "--server.port", str(args.port), "--browser.gatherUsageStats", "false", *rest]
    try:
        return subprocess.call(command, cwd=APP.parent)
    except KeyboardInterrupt:
        return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        return run_app(argv[1:])
    if argv[:1] in ([], ["-h"], ["--help"]):
        print("usage: decodescope run [--host HOST] [--port PORT]   start the app\n"
              "       decodescope decode --prompt TEXT ...         decode and print every step "
              "(see decodescope decode -h)\n"
              "       decodescope lens --prompt TEXT ...           the next token, layer by layer "
              "(see decodescope lens -h)")
        return 0 if argv else 2
    from engine.cli.main import main as engine_main

    return engine_main(argv, prog="decodescope")


if __name__ == "__main__":
    sys.exit(main())
