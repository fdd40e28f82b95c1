"""How `make run` serves the app: on localhost only unless HOST says otherwise, and with no file
watcher (Streamlit's watcher puts an inotify watch on every folder under the app, .venv included,
and floods the log with "Inotify queue overflowed" while anything is installed or tested).

The server is started with the very command line `make -n run` prints, with this Python.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent


def make_run_command(*variables: str) -> list:
    """The server command `make run` would start (a dry run: nothing is installed or started)."""
    out = subprocess.run(["make", "-n", "run", *variables], cwd=ROOT, capture_output=True, text=True, check=True)
    line = next(line for line in out.stdout.splitlines() if "-m ui.serve" in line)
    return shlex.split(line)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def inotify_watches(pid: int) -> int:
    watches = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if "inotify" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                    watches += sum(line.startswith("inotify wd:") for line in info)
        except OSError:
            continue
    return watches


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for inotify watches")


def test_make_run_serves_localhost_and_host_opens_it_to_a_room():
    assert make_run_command()[make_run_command().index("--server.address") + 1] == "localhost"
    room = make_run_command("HOST=0.0.0.0")
    assert room[room.index("--server.address") + 1] == "0.0.0.0"


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_the_server_make_run_starts_listens_on_localhost_and_watches_no_files(tmp_path):
    from websockets.sync.client import connect

    port = free_port()
    command = make_run_command(f"PORT={port}")
    assert command[0].endswith("python") and command[1:3] == ["-m", "ui.serve"]
    command = [sys.executable, *command[1:], "--server.headless", "true"]
    # a server that offers no local model loads none as it starts: this test is about the socket and the watches
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", DECODESCOPE_MODELS="served")
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text(errors="replace")[-3000:]
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.5)

        # Streamlit starts watching files when a browser session connects (the sync client needs no event
        # loop, so this runs after the Playwright tests in one process too)
        with connect(f"ws://localhost:{port}/_stcore/stream", subprotocols=["streamlit"]):
            time.sleep(3)
            assert inotify_watches(proc.pid) == 0
        listening = {c.laddr.ip for c in psutil.Process(proc.pid).net_connections("inet") if c.status == "LISTEN"}
        assert listening and listening <= {"127.0.0.1", "::1"}, listening
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_the_server_refuses_uploads_bigger_than_the_largest_trace_it_reads():
    """Streamlit holds an upload in memory for the session's life; its default would take 200 MB."""
    from engine.trace import MAX_TRACE_BYTES

    shown = subprocess.run([sys.executable, "-m", "streamlit", "config", "show"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    limit_mb = int(next(line for line in shown.splitlines() if line.startswith("maxUploadSize")).split("=")[1])
    assert MAX_TRACE_BYTES <= limit_mb * 2**20 < 2 * MAX_TRACE_BYTES
