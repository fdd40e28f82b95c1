"""Fixtures for every test that talks to a server (tests/served, tests/ui, tests/browser; tests/conftest.py
imports them): a real llama.cpp server (llama-cpp-python's) serving the bundled SmolLM2 GGUF on 127.0.0.1,
started once for the tests that need it and stopped after them; and small stand-in servers that
misbehave on purpose (silent, no logprobs) and count the requests that reached them."""
from __future__ import annotations

import http.server
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from engine.model import bundled_gguf_path
from served_helpers import free_port

START_WAIT_S = 300      # a loaded 2-core machine can take minutes to map the file; not a time limit on the code


@pytest.fixture(scope="session")
def llama_server():
    """The base URL of a llama.cpp server on the bundled SmolLM2. `make test` installs llama-cpp-python and
    sets DECODESCOPE_REQUIRE_SERVER=1, so there a missing server is a failure, not a skip."""
    if importlib.util.find_spec("llama_cpp") is None:
        message = "llama-cpp-python[server] is not installed (make test installs it)"
        if os.environ.get("DECODESCOPE_REQUIRE_SERVER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    port = free_port()
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"decodescope-llama-{port}.log"), "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_gguf_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "512", "--n_threads", "2", "--verbose", "false"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_WAIT_S
    try:
        while True:
            if process.poll() is not None:
                log.flush()
                pytest.fail(f"the llama.cpp server exited with {process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server did not start within {START_WAIT_S} s; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers /v1/models with one model, and /v1/completions as `self.server.completion` says.
    Every request's method and path is appended to `self.server.requests`."""

    def do_GET(self):
        self.server.requests.append(("GET", self.path))
        self._json({"object": "list", "data": [{"id": "stub-model", "object": "model", "owned_by": "me"}]})

    def do_POST(self):
        self.server.requests.append(("POST", self.path))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.server.completion == "silent":
            time.sleep(self.server.silence_s)
            return
        if self.path.startswith("/v1/completions"):
            self._json(self.server.completion)
        else:
            self.send_error(404)

    def _json(self, value):
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    """stub_server(completion) -> base URL of a server that lists 'stub-model' and answers every completion
    with `completion` (a dict), or, for "silent", with nothing for a few seconds.
    stub_server.requests(url) lists the (method, path) of every request that reached it;
    stub_server.stop(url) shuts it down (later requests find nothing listening)."""
    servers = []
    by_url = {}

    def start(completion, silence_s: float = 5.0):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        server.completion, server.silence_s, server.daemon_threads = completion, silence_s, True
        server.requests = []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        by_url[url] = server
        return url

    def stop(url):
        server = by_url[url]
        if server in servers:
            servers.remove(server)
            server.shutdown()
            server.server_close()

    start.requests = lambda url: list(by_url[url].requests)
    start.stop = stop
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
