"""A real llama.cpp server (llama-cpp-python's) serving the bundled SmolLM2 GGUF on 127.0.0.1,
started once for the tests that need it and stopped after them; and small stand-in servers
that misbehave on purpose (silent, no logprobs), for the error lines."""
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
    """Answers /v1/models with one model, and /v1/completions as `self.server.completion` says."""

    def do_GET(self):
        self.server.requests.append(("GET", self.path, None))
        self._json({"object": "list", "data": [{"id": "stub-model", "object": "model",
                                                "owned_by": self.server.owned_by}]})

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
        self.server.requests.append(("POST", self.path, payload))
        if self.server.completion == "silent":
            time.sleep(self.server.silence_s)
            return
        if self.path.startswith("/v1/completions"):
            completion = self.server.completion
            self._json(completion(payload) if callable(completion) else completion)
        elif self.path == "/tokenize" and self.server.tokenize is not None:
            self._json({"tokens": self.server.tokenize(payload["prompt"])})
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
    with `completion` (a dict, or a function of the request's JSON), or, for "silent", with nothing for a
    few seconds. `owned_by` is what /v1/models reports ("vllm" makes it a vLLM); `tokenize`, a function of
    the text, answers vLLM's /tokenize. stub_server.requests lists (method, path, JSON) of what arrived."""
    servers = []

    def start(completion, silence_s: float = 5.0, owned_by: str = "me", tokenize=None):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        server.completion, server.silence_s, server.daemon_threads = completion, silence_s, True
        server.owned_by, server.tokenize, server.requests = owned_by, tokenize, start.requests
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    start.requests = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
