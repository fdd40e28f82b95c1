"""Fixtures for every test that talks to a server (tests/served, tests/ui, tests/browser; tests/conftest.py
imports them): a real llama.cpp server (llama-cpp-python's) serving the bundled SmolLM2 GGUF on 127.0.0.1,
started once for the tests that need it and stopped after them; and small stand-in servers that
misbehave on purpose (silent, no logprobs) and count the requests that reached them."""
from __future__ import annotations

import http.server
import importlib.util
import json
import os
import threading
import time

import pytest

from served_helpers import ServerFailed, running_llama_server


@pytest.fixture(scope="session")
def llama_server():
    """The base URL of a llama.cpp server on the bundled SmolLM2. `make test` installs llama-cpp-python and
    sets DECODESCOPE_REQUIRE_SERVER=1, so there a missing server is a failure, not a skip."""
    if importlib.util.find_spec("llama_cpp") is None:
        message = "llama-cpp-python[server] is not installed (make test installs it)"
        if os.environ.get("DECODESCOPE_REQUIRE_SERVER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    try:
        with running_llama_server() as url:
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers /v1/models with one model, and /v1/completions as `self.server.completion` says.
    Every request's method and path is appended to `self.server.requests`."""

    def do_GET(self):
        self.server.requests.append(("GET", self.path))
        self.server.payloads.append(None)
        self._json({"object": "list", "data": [{"id": "stub-model", "object": "model",
                                                "owned_by": self.server.owned_by}]})

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
        self.server.requests.append(("POST", self.path))
        self.server.payloads.append(payload)
        if self.server.completion == "silent":
            time.sleep(self.server.silence_s)
            return
        if self.path.startswith("/v1/completions"):
            completion = self.server.completion
            answer = completion(payload) if callable(completion) else completion
            if payload.get("stream"):      # the whole answer as one server-sent event
                self._events([answer])
            else:
                self._json(answer)
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

    def _events(self, chunks):
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
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
    the text, answers vLLM's /tokenize.
    stub_server.requests(url) lists the (method, path) of every request that reached it;
    stub_server.sent(url, path) the JSON bodies sent to that path;
    stub_server.stop(url) shuts it down (later requests find nothing listening)."""
    servers = []
    by_url = {}

    def start(completion, silence_s: float = 5.0, owned_by: str = "me", tokenize=None):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        server.completion, server.silence_s, server.daemon_threads = completion, silence_s, True
        server.owned_by, server.tokenize, server.requests, server.payloads = owned_by, tokenize, [], []
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
    start.sent = lambda url, path: [body for (_, at), body in zip(by_url[url].requests, by_url[url].payloads)
                                    if at == path]
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
