"""A model server that misbehaves on purpose, one fault at a time, on a raw socket on 127.0.0.1.

`RawServer(fault)` reads each request itself (request line, headers, a Content-Length body) and writes back
whatever bytes the fault says, at the pace it says: a garbled status line, an answer with no status line at
all (HTTP/0.9), a broken chunked body, a byte a second, a stream of pings. Nothing here goes through an HTTP
library, so the client meets each fault exactly as written. The well-formed answers are the OpenAI
completions format that vLLM and llama.cpp send (`models`, `completion`, `events`).
"""
from __future__ import annotations

import json
import socket
import threading
import time

MODEL = "stand-in"


def models(owned_by="me", names=(MODEL,)) -> dict:
    return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": owned_by} for name in names]}


def logprobs(tokens: list, top: list | None = None) -> dict:
    """The completions `logprobs` object for `tokens` [(text, logprob)], each step's top list `top` (or the
    token alone)."""
    return {"tokens": [t for t, _ in tokens], "token_logprobs": [lp for _, lp in tokens],
            "top_logprobs": top if top is not None else [{t: lp} for t, lp in tokens],
            "text_offset": list(range(len(tokens)))}


def completion(tokens: list, finish="length", top: list | None = None) -> dict:
    return {"choices": [{"text": "".join(t for t, _ in tokens), "finish_reason": finish,
                         "logprobs": logprobs(tokens, top)}]}


def http(body: bytes | dict, status: bytes = b"200 OK", content_type: bytes = b"application/json",
         headers: bytes = b"") -> bytes:
    """A whole HTTP/1.1 answer."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\nConnection: close\r\n" + headers + b"\r\n" + body)


def event(value) -> bytes:
    return b"data: " + (value if isinstance(value, bytes) else json.dumps(value).encode()) + b"\n\n"


def events_head() -> bytes:
    """The head of a streamed answer whose end is the connection's close."""
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def token_events(tokens: list) -> bytes:
    """One event per token, none of them the last (no finish_reason)."""
    return b"".join(event({"choices": [{"text": t, "finish_reason": None, "logprobs": logprobs([(t, lp)])}]})
                    for t, lp in tokens)


def stream(tokens: list) -> bytes:
    """A whole, well-formed streamed answer: one event per token, the last with its finish_reason, [DONE]."""
    last = event({"choices": [{"text": "", "finish_reason": "length", "logprobs": None}]})
    return events_head() + token_events(tokens) + last + event(b"[DONE]")


TOKENS = [(" Paris", -0.25), (".", -0.5), (" It", -1.0)]


def well_formed(method: str, path: str, payload) -> bytes:
    """The answers of a server that behaves: one model, three tokens, no tokenizer endpoint."""
    if path == "/v1/models":
        return http(models())
    if path == "/v1/completions":
        tokens = TOKENS[:payload.get("max_tokens", 3)]
        return stream(tokens) if payload.get("stream") else http(completion(tokens))
    return http({"error": "not found"}, status=b"404 Not Found")


class RawServer:
    """A listening socket on 127.0.0.1 whose every request is answered by `fault(method, path, payload)`:
    bytes (sent at once), or an iterable of bytes and numbers (a number is a pause in seconds). The
    connection is closed after the answer. `url` is its address; `close()` stops it."""

    def __init__(self, fault):
        self.fault, self.requests = fault, []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            try:
                method, path, payload = self._read(conn)
                self.requests.append((method, path))
                answer = self.fault(method, path, payload)
                for piece in ([answer] if isinstance(answer, bytes) else answer):
                    if self.closed.is_set():
                        return
                    if isinstance(piece, bytes):
                        conn.sendall(piece)
                    else:
                        time.sleep(piece)
            except OSError:
                return                    # the client gave up and closed: what the test wants to see

    @staticmethod
    def _read(conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                raise OSError("closed before the headers")
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                       if line.lower().startswith("content-length:")), 0)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return method, path, json.loads(body) if body else None

    def close(self):
        self.closed.set()
        self.sock.close()
