"""HTTP to a server the user names, bounded: one deadline for each whole request (a watchdog shuts the
connection when it passes), at most so many headers and bytes, and every failure as one ServedError line that
names the server and the cause. The answers' contents are checked where they are read (client.py)."""
from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import httpx2

from ..errors import DecodeScopeError
from ..safe_text import printable

MAX_HEADERS = 100                    # an answer's header lines, and the bytes of each (the standard library's
MAX_HEADER_LINE = 65_536             # limits; httpx2 itself allows 100 KB of headers in all)
MAX_ERROR_CHARS = 200                # of a server's own error text, quoted in our one line


class ServedError(DecodeScopeError):
    """The server could not give what was asked: one line that names the server and the cause.
    `trace`: the steps a decode had recorded before it (served_decode sets it), else None."""
    trace = None


def quote(text) -> str:
    """A server's text inside our one line: whitespace runs as one space, controls made visible, bounded."""
    text = printable(" ".join(str(text).split()))
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 3] + "..."


class Deadline:
    """One request's whole time. The library's own timeouts bound each wait; this bounds their sum: a
    watchdog shuts the request's socket when the time is up, which ends whatever read is waiting on it,
    and each chunk read checks the time left."""

    def __init__(self, seconds: float):
        self.seconds, self.ends = seconds, time.monotonic() + seconds
        self.expired = False
        self._sockets: list = []
        self._lock = threading.Lock()

    def trace(self, name: str, info: dict) -> None:
        """httpcore's trace hook: note each connection's socket as it is made."""
        if name.endswith((".connect_tcp.complete", ".start_tls.complete")):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with self._lock:
                    self._sockets.append(sock)
                    if self.expired:
                        shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                shut(sock)

    @contextlib.contextmanager
    def watching(self):
        timer = threading.Timer(max(0.0, self.ends - time.monotonic()), self._expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def check(self) -> None:
        if time.monotonic() > self.ends:
            self.expired = True
            raise ServedError("deadline")            # replaced by `error` where the request is named

    def error(self, url: str) -> ServedError:
        return ServedError(f"server at {url} did not answer within {self.seconds:g} s")


def shut(sock) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_CLIENT: httpx2.Client | None = None
_CLIENT_LOCK = threading.Lock()


def http_client() -> httpx2.Client:
    """One HTTP client for every server: a new connection per request (no keep-alive), so each request
    has its own socket for its deadline, and nothing a server sent before can reach the next answer."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = httpx2.Client(limits=httpx2.Limits(max_keepalive_connections=0), follow_redirects=False)
        return _CLIENT


def check_headers(response, url: str) -> None:
    """Headers bounded as the standard library bounds them: at most 100, each line at most 64 KiB."""
    raw = response.headers.raw
    if len(raw) > MAX_HEADERS:
        raise ServedError(f"server at {url} sent {len(raw)} headers; the limit is {MAX_HEADERS}")
    if any(len(name) + len(value) + 4 > MAX_HEADER_LINE for name, value in raw):
        raise ServedError(f"server at {url} sent a header line over {MAX_HEADER_LINE // 1024} KiB")


def read_bounded(response, deadline: Deadline, limit: int) -> bytes | None:
    """The body, at most `limit` bytes (None when it is longer), the deadline checked at each chunk."""
    chunks, size = [], 0
    for chunk in response.iter_raw():
        deadline.check()
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def transport_line(url: str, exc: BaseException) -> str:
    """What broke, for a person: refused, unreachable, or the answer itself (a protocol fault)."""
    cause = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx2.ConnectError):
        if isinstance(cause, ConnectionRefusedError):
            return f"server at {url} is not running (connection refused)"
        return f"server at {url} cannot be reached: {quote(cause)}"
    if isinstance(exc, httpx2.RemoteProtocolError | httpx2.DecodingError | httpx2.SSEError):
        return f"server at {url} sent an answer that is not valid HTTP: {quote(exc)}"
    return f"server at {url} broke off the answer: {quote(exc) or type(exc).__name__}"


def error_text(response, deadline: Deadline) -> str:
    """A refusal's reason: the server's own error message when its body says one, else the status text."""
    reason = response.reason_phrase or "no reason given"
    location = response.headers.get("location")
    if 300 <= response.status_code < 400 and location:
        return f"redirect to {location[:80]} refused"
    body = read_bounded(response, deadline, 20_000)
    try:
        data = json.loads(body.decode("utf-8", "replace")) if body else None
    except (ValueError, RecursionError):
        return reason
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return str(error)
    return str(data) if data is not None else reason
