"""Fixtures for every test that talks to a server (tests/served, tests/ui, tests/browser; tests/conftest.py
imports them): a real llama.cpp server (llama-cpp-python's) serving the bundled SmolLM2 GGUF on 127.0.0.1,
started once for the tests that need it and stopped after them; and small stand-in servers that
misbehave on purpose (silent, no logprobs) and count the requests that reached them."""
from __future__ import annotations

import http.server
import importlib.util
import json
import math
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


# ---- a stand-in playing vLLM under each --logprobs-mode ---------------------------------------------------
VLLM_LOGITS = {" Paris": 3.0, " the": 2.2, " a": 1.5, " Lyon": 0.7, " not": 0.1, " one": -0.4}
VLLM_MINUS_INF = -9999.0          # how vLLM writes a removed token's log-probability (JSON has no -inf)


def _log_softmax(scores: dict) -> dict:
    finite = [v for v in scores.values() if v != -math.inf]
    top = max(finite)
    log_total = top + math.log(sum(math.exp(v - top) for v in finite))
    return {t: v - log_total if v != -math.inf else -math.inf for t, v in scores.items()}


def vllm_like(mode: str = "raw_logprobs", logits: dict = VLLM_LOGITS):
    """A completion function (for stub_server, with owned_by="vllm") that answers as vLLM does when started
    with `--logprobs-mode mode`: every step's next-token logits are `logits`. A greedy request (temperature 0)
    sees them as they are; a sampled one has them divided by its temperature, then cut by its top_k and min_p
    (a removed token is minus infinity). raw_* modes report the logits before that chain, processed_* after
    it, *_logprobs as log-softmax, *_logits as they are; minus infinity is written -9999. The token
    'sampled' is the most likely one left (every listed number is what the mode says either way)."""
    def complete(payload):
        temperature, top_k = payload.get("temperature", 1.0), payload.get("top_k", -1)
        chain = dict(logits)
        if temperature > 0:
            chain = {t: v / temperature for t, v in chain.items()}
            if top_k > 0:
                kth = sorted(chain.values(), reverse=True)[min(top_k, len(chain)) - 1]
                chain = {t: v if v >= kth else -math.inf for t, v in chain.items()}
            if payload.get("min_p", 0.0) > 0:
                floor = max(chain.values()) + math.log(payload["min_p"])
                chain = {t: v if v >= floor else -math.inf for t, v in chain.items()}
        shown = chain if mode.startswith("processed") else dict(logits)
        if mode.endswith("logprobs"):
            shown = _log_softmax(shown)
        shown = {t: max(v, VLLM_MINUS_INF) for t, v in shown.items()}
        chosen = max(chain, key=chain.get)
        top = dict(sorted(shown.items(), key=lambda p: -p[1])[:payload.get("logprobs", 1)])
        top[chosen] = shown[chosen]
        n = payload.get("max_tokens", 1)
        return {"choices": [{"text": chosen * n, "finish_reason": "length", "logprobs": {
            "tokens": [chosen] * n, "token_logprobs": [shown[chosen]] * n, "top_logprobs": [top] * n,
            "text_offset": list(range(n))}}]}
    return complete
