"""A model behind an OpenAI-compatible completions server: vLLM, or llama.cpp (its C++ server or
llama-cpp-python's), reached over HTTP at an address the user names.

A server gives, per generated token, the top-N tokens and their log-probabilities, not the
logits over the whole vocabulary. Everything drawn from it is therefore a top-N view: the
rest of the mass is one "other" bucket, and the trace says so (`model_facts["served"]`).

A server is as untrusted as an uploaded file. HTTP itself (status line, headers, chunked bodies,
connections) is httpx2's, whose exceptions all become one ServedError line naming the server and
the cause; server-sent events are read by httpx2's EventSource. Each request has one deadline for
the whole of it and bounded headers (transport.py: a server that sends a byte a second or pings
forever cannot hold a decode past it); kept here: the size limits on every answer, and a check of
every field before use.
"""
from __future__ import annotations

import contextlib
import json
import math
import urllib.parse
from dataclasses import dataclass, field

import httpx2

from ..errors import DecodeScopeError
from ..safe_text import clean_text, printable
from . import numbers as nums
from .transport import (Deadline, ServedError, check_headers, error_text, http_client, quote, read_bounded,
                        transport_line)

MAX_URL_CHARS = 2_000
MAX_MODEL_CHARS = 300
MAX_RESPONSE_BYTES = 32_000_000      # one answer; 24 steps x 200 candidates is about 0.5 MB
MAX_LINE_BYTES = 1_000_000          # one streamed event
DEFAULT_TIMEOUT_S = 60.0
NO_TOKENIZER = -1
MAX_TOKEN_ID = 2**31 - 2**24         # a server's token ids lie below the ids decode.py makes for other texts
VLLM_DEFAULT_MAX_LOGPROBS = 20       # vLLM refuses more unless started with --max-logprobs


@dataclass(frozen=True)
class TopN:
    """One position as a server reports it: the chosen token and the top-N alternatives."""
    text: str                         # the token the server chose (or that was fed, when scoring)
    logprob: float                    # its log-probability under the raw distribution
    top: list = field(default_factory=list)   # [(text, logprob)] best first, at most N (+ the chosen)
    offset: int | None = None         # where the token starts in the text (prompt included, when echoed)


def check_url(url: str) -> str:
    """The server's base address, checked whole: http or https, a host, no credentials, bounded.
    A trailing `/v1` (as OpenAI clients take it) is accepted and removed."""
    if not isinstance(url, str) or not url.strip():
        raise ServedError("server address is empty; give one like http://127.0.0.1:8000")
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise ServedError(f"server address is {len(url):,} characters; the limit is {MAX_URL_CHARS:,}")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise ServedError("server address holds spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.hostname
    except ValueError:                   # "http://[::1", "http://::1]", a bracketed host that is no address
        raise ServedError(f"server address has a malformed host: {printable(url[:60])!r}") from None
    if parts.scheme not in ("http", "https"):
        raise ServedError(f"server address must start with http:// or https://, got {url[:60]!r}")
    if not parts.hostname:
        raise ServedError(f"server address has no host: {url[:60]!r}")
    if parts.username or parts.password:
        raise ServedError("server address must not hold a user name or password")
    if parts.query or parts.fragment:
        raise ServedError("server address must not hold a query (?) or a fragment (#)")
    try:
        _ = parts.port               # reading the port is the check: urllib raises ValueError on a bad one
    except ValueError:
        raise ServedError(f"server address has a bad port: {url[:60]!r}") from None
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    try:
        httpx2.URL(base)                 # what the HTTP library will be given: a host it cannot use is named now
    except (httpx2.InvalidURL, ValueError):
        raise ServedError(f"server address has a malformed host: {url[:60]!r}") from None
    return base


class Server:
    """One model on one server. `connect` checks both before any decode starts."""

    def __init__(self, url: str, model: str, kind: str, timeout: float = DEFAULT_TIMEOUT_S):
        self.url, self.model, self.kind, self.timeout = url, model, kind, timeout
        self._ids: dict[str, int] = {}             # token text -> id, learnt from the tokenizer endpoint
        self._tokenize_route: int | None = None     # which tokenizer endpoint answers (NO_TOKENIZER: none)
        self._bos_ids: list | None = None
        # raw or processed numbers, and how that was learnt (numbers.py); connect sets them
        self.numbers, self.numbers_from = nums.learnt_without_probe(kind) or (nums.UNKNOWN, nums.UNKNOWN)

    @classmethod
    def connect(cls, url: str, model: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> "Server":
        """Ask the server which models it has; pick `model` (or its only one). The server's kind
        (vllm, llama.cpp, llama-cpp-python) comes from the `owned_by` field it reports."""
        base = check_url(url)
        if model is not None:
            model = model.strip()
            if len(model) > MAX_MODEL_CHARS:
                raise ServedError(f"model name is {len(model):,} characters; the limit is {MAX_MODEL_CHARS}")
        probe = cls(base, model or "", "unknown", timeout)
        listing = probe._call("GET", "/v1/models")
        entries = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str)
                                                    for e in entries):
            raise ServedError(f"server at {base} gave no model list at /v1/models; is it an OpenAI-compatible server?")
        names = [clean_text(e["id"]) for e in entries]
        if not names:
            raise ServedError(f"server at {base} serves no model")
        if any(not name or len(name) > MAX_MODEL_CHARS for name in names):
            raise ServedError(f"server at {base} lists a model whose name is empty or over {MAX_MODEL_CHARS} "
                              "characters")
        if not model:
            if len(names) > 1:
                raise ServedError(f"server at {base} serves {len(names)} models; name one: "
                                  + ", ".join(quote(n) for n in names[:8]))
            model = names[0]
        elif model not in names:
            raise ServedError(f"server at {base} has no model named '{quote(model)}'; it serves: "
                              + ", ".join(f"'{quote(n)}'" for n in names[:8]))
        owner = next(e.get("owned_by") for e in entries if clean_text(e["id"]) == model)
        owner = owner if isinstance(owner, str) else ""          # a list, a dict, a number: an unknown server
        kind = {"vllm": "vllm", "llamacpp": "llama.cpp"}.get(owner, "llama-cpp-python" if owner == "me" else "openai")
        server = cls(base, model, kind, timeout)
        if nums.learnt_without_probe(kind) is None:
            server.numbers, server.numbers_from = server.probe_numbers(), nums.PROBED
        return server

    def probe_numbers(self) -> str:
        """Raw or processed, from one one-token request whose two readings cannot agree (numbers.py). A server
        that returns logits is refused: every figure reads the numbers as probabilities."""
        answer = self._call("POST", "/v1/completions", self._payload(nums.PROBE_PROMPT, **nums.PROBE_SETTINGS))
        logprobs = self._choice(answer).get("logprobs")
        tops = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
        top = tops[0] if isinstance(tops, list) and tops else None
        if not isinstance(top, dict) or len(top) > 1000 or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in top.values()):
            raise ServedError(f"server at {self.url} gave no logprobs for a one-token request; it must support "
                              "the completions 'logprobs' field")
        verdict = nums.read_probe([float(v) for v in top.values()], conclusive_raw=self.kind == "vllm")
        if verdict == nums.LOGITS:
            raise ServedError(f"server at {self.url} returns logits, not log-probabilities (vLLM's --logprobs-mode "
                              "raw_logits or processed_logits); start it with --logprobs-mode raw_logprobs")
        return verdict

    # ---- facts ---------------------------------------------------------------------
    @property
    def max_logprobs(self) -> int:
        """The most top-N a request may ask for here (vLLM's default cap; the others have none we know)."""
        return VLLM_DEFAULT_MAX_LOGPROBS if self.kind == "vllm" else 200

    def facts(self, top_n: int) -> dict:
        """The model facts a served trace carries: what it is and how exact its numbers are."""
        return {"name": self.model, "served": {"url": self.url, "server": self.kind, "top_n": top_n,
                                                "exact": False, "logprobs": self.numbers,
                                                "logprobs_from": self.numbers_from}}

    # ---- requests --------------------------------------------------------------------
    def _payload(self, prompt: str, *, max_tokens: int, logprobs: int, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, min_p: float = 0.0, repetition_penalty: float = 1.0, seed: int | None = None,
                 echo: bool = False, stream: bool = False, samplers: dict | None = None) -> dict:
        """A completions request with every sampling setting sent explicitly: llama.cpp's defaults
        (top-k 40, top-p 0.95, min-p 0.05) would otherwise shape the run silently. samplers: the
        engine-specific settings, already in this server's spelling (engine.served.samplers)."""
        payload = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "logprobs": logprobs,
                   "temperature": temperature, "top_p": top_p, "min_p": min_p, "echo": echo, "stream": stream,
                   "top_k": (-1 if self.kind == "vllm" else 0) if top_k == 0 else top_k}
        if self.kind == "vllm":
            payload["repetition_penalty"] = repetition_penalty
        else:
            payload["repeat_penalty"] = repetition_penalty
        if self.kind == "llama.cpp":
            payload["post_sampling_probs"] = False     # the raw distribution, which every figure reads
        if seed is not None:
            payload["seed"] = seed
        payload.update(samplers or {})
        return payload

    def complete(self, prompt: str, **settings) -> tuple[str, list[TopN], str]:
        """One completion (settings as in `_payload`). Returns (text, one TopN per token, finish_reason)."""
        answer = self._call("POST", "/v1/completions", self._payload(prompt, **settings))
        choice = self._choice(answer)
        reason = choice.get("finish_reason")
        return (clean_text(choice["text"]), _positions(choice.get("logprobs"), self.url),
                reason if isinstance(reason, str) else "")

    def stream(self, prompt: str, **settings):
        """The same completion, streamed: yields one TopN per token as the server sends it (server-sent
        events), so a long decode shows its progress and can be stopped. The whole stream is one request:
        it has the one deadline, and every event and the whole answer are read with a size limit. A stream
        that ends before the server says why (finish_reason) raises: a decode cut short is never whole."""
        payload = self._payload(prompt, stream=True, **settings)
        with self._exchange("POST", "/v1/completions", payload) as (response, deadline):
            kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if kind != "text/event-stream":
                raise ServedError(f"server at {self.url} answered a streamed request with "
                                  f"{quote(kind) or 'no content type'}, not a stream of events; "
                                  "its answer cannot be read token by token")
            total = count = 0
            for event in httpx2.EventSource(response, max_event_size=MAX_LINE_BYTES):
                deadline.check()
                total += len(event.data)
                if total > MAX_RESPONSE_BYTES:
                    raise ServedError(f"server at {self.url} sent a streamed answer over the size limit")
                data = event.data.strip()
                if not data:
                    continue                          # an empty event: a keep-alive
                if data == "[DONE]":         # before any finish_reason: the server cut this answer short
                    raise ServedError(f"server at {self.url} ended the answer after {count} tokens without a "
                                      "reason; llama-cpp-python does that to a streamed answer when another "
                                      "request arrives (start it with --interrupt_requests False)")
                try:
                    chunk = json.loads(data, parse_constant=_no_constant)
                except (ValueError, RecursionError):
                    raise ServedError(f"server at {self.url} streamed something that is not JSON") from None
                choice = self._choice(chunk)
                if choice.get("logprobs") is not None or choice["text"]:   # the closing event has neither
                    for position in _positions(choice.get("logprobs"), self.url):
                        count += 1
                        yield position
                if choice.get("finish_reason"):
                    return
            raise ServedError(f"server at {self.url} closed the stream after {count} tokens without saying why "
                              "it ended (no finish_reason): the answer is cut short")

    def _choice(self, answer) -> dict:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ServedError(f"server at {self.url} gave a completion with no choices")
        if not isinstance(choices[0].get("text"), str):
            raise ServedError(f"server at {self.url} gave a completion with no text")
        return choices[0]

    def prompt_logprobs(self, prompt: str, top_n: int) -> list | None:
        """vLLM's `prompt_logprobs`: for each prompt token after the first, {token id: (logprob, rank, text)}
        holding the top-N and the prompt's own token. None where the server does not offer it."""
        if self.kind != "vllm":
            return None
        answer = self._call("POST", "/v1/completions", {"model": self.model, "prompt": prompt, "max_tokens": 1,
                                                        "temperature": 0.0, "prompt_logprobs": top_n})
        choices = answer.get("choices") if isinstance(answer, dict) else None
        rows = choices[0].get("prompt_logprobs") if isinstance(choices, list) and choices and isinstance(
            choices[0], dict) else None
        if not isinstance(rows, list):
            return None
        out = []
        for row in rows:
            if row is None:
                out.append(None)
                continue
            if not isinstance(row, dict) or len(row) > 1000:
                raise ServedError(f"server at {self.url} gave prompt_logprobs of the wrong shape")
            entries = {}
            for key, entry in row.items():
                try:
                    token_id = int(key)
                    if not 0 <= token_id < MAX_TOKEN_ID:
                        raise ValueError
                    logprob = _finite_logprob(entry["logprob"])
                    rank = entry.get("rank")
                    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 1 else None
                    text = entry.get("decoded_token")
                except (TypeError, ValueError, KeyError):
                    raise ServedError(f"server at {self.url} gave prompt_logprobs of the wrong shape") from None
                entries[token_id] = (logprob, rank, clean_text(text) if isinstance(text, str) else "")
            out.append(entries)
        return out

    def known_token_id(self, text: str) -> int | None:
        """The id `token_id` found for this text before, without a request."""
        return self._ids.get(text)

    def token_id(self, text: str) -> int | None:
        """The id of the one token whose text this is, from the server's tokenizer; None when the text
        is not exactly one token (byte pieces, texts the server merged), or the server has no tokenizer."""
        if text in self._ids:
            return self._ids[text]
        ids = self.tokenize(text)
        found = ids[0] if ids is not None and len(ids) == 1 else None
        if len(self._ids) < 500_000:
            self._ids[text] = found
        return found

    def tokenize(self, text: str) -> list[int] | None:
        """The server's token ids for `text` (no BOS), or None when it offers no tokenizer endpoint.
        The endpoints are tried once, in order; the one that answers is used from then on."""
        routes = [("/extras/tokenize", {"input": text, "model": self.model}),                  # llama-cpp-python
                  ("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False}),  # vLLM
                  ("/tokenize", {"content": text, "add_special": False})]                    # llama.cpp
        if self._tokenize_route == NO_TOKENIZER:
            return None
        tried = [self._tokenize_route] if self._tokenize_route is not None else range(len(routes))
        for index in tried:
            path, payload = routes[index]
            try:
                answer = self._call("POST", path, payload)
            except ServedError:
                continue
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if isinstance(tokens, list) and all(isinstance(t, int) and not isinstance(t, bool)
                                                and 0 <= t < MAX_TOKEN_ID for t in tokens):
                self._tokenize_route = index
                if path == "/extras/tokenize":            # it always adds the BOS token: drop it
                    bos = self._bos()
                    tokens = tokens[len(bos):] if tokens[:len(bos)] == bos else tokens
                return tokens
        if self._tokenize_route is None:
            self._tokenize_route = NO_TOKENIZER
        return None

    def _bos(self) -> list:
        """What llama-cpp-python's tokenizer gives for no text: the BOS it puts before every text."""
        if self._bos_ids is None:
            answer = self._call("POST", "/extras/tokenize", {"input": "", "model": self.model})
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            self._bos_ids = tokens if isinstance(tokens, list) and len(tokens) <= 2 and all(
                isinstance(t, int) and not isinstance(t, bool) for t in tokens) else []
        return self._bos_ids

    @contextlib.contextmanager
    def _exchange(self, method: str, path: str, payload: dict | None = None):
        """One request, as (response, deadline) once the server answered 200 with its headers. Everything
        that goes wrong on the way, sending, in HTTP itself, or past the deadline, is one ServedError line;
        a redirect is not followed (the server the user named answers itself)."""
        deadline = Deadline(self.timeout)
        headers = {"Accept": "application/json, text/event-stream", "Accept-Encoding": "identity"}
        try:
            with deadline.watching():
                with http_client().stream(method, self.url + path, json=payload, headers=headers,
                                      timeout=httpx2.Timeout(self.timeout), follow_redirects=False,
                                      extensions={"trace": deadline.trace}) as response:
                    check_headers(response, self.url)
                    if not 200 <= response.status_code < 300:
                        raise ServedError(f"server at {self.url} refused {path} (HTTP {response.status_code}): "
                                          f"{quote(error_text(response, deadline))}")
                    encoding = response.headers.get("content-encoding", "identity").strip().lower()
                    if encoding not in ("", "identity"):
                        raise ServedError(f"server at {self.url} sent a compressed answer ({quote(encoding)}) "
                                          "that was not asked for")
                    yield response, deadline
        except ServedError:
            if deadline.expired:
                raise deadline.error(self.url) from None
            raise
        except (httpx2.HTTPError, httpx2.InvalidURL, httpx2.StreamError, OSError, ValueError) as exc:
            if deadline.expired or isinstance(exc, httpx2.TimeoutException):
                raise deadline.error(self.url) from None
            raise ServedError(transport_line(self.url, exc)) from None

    def _call(self, method: str, path: str, payload: dict | None = None):
        """One HTTP request; the answer's JSON, or ServedError with one line (down, timeout, refused)."""
        with self._exchange(method, path, payload) as (response, deadline):
            body = read_bounded(response, deadline, MAX_RESPONSE_BYTES)
        if body is None:
            raise ServedError(f"server at {self.url} sent more than {MAX_RESPONSE_BYTES / 1e6:g} MB for {path}")
        try:
            return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ServedError(f"server at {self.url} answered {path} with something that is not JSON") from None


@contextlib.contextmanager
def answers_checked(server: Server):
    """Every answer is checked field by field where it is read; this is the last line behind those checks:
    answers that pass each check alone and still do not fit together (a server whose answers change from
    one request to the next) end the decode with one line naming the server, never a traceback."""
    try:
        yield
    except DecodeScopeError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, AttributeError, RuntimeError) as exc:
        raise ServedError(f"server at {server.url} gave answers that do not fit together "
                          f"({type(exc).__name__}); DecodeScope cannot use them") from None


def _no_constant(name):
    raise ValueError(name)


def _finite_logprob(value) -> float:
    """A log-probability as a server writes it: a finite number at most 0 (a hair above 0 is rounding)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError
    try:
        value = float(value)         # an integer of 400 digits is beyond any float
    except OverflowError:
        raise ValueError from None
    if not math.isfinite(value) or value > 1e-6:
        raise ValueError
    return min(value, 0.0)


def _positions(logprobs, url: str) -> list[TopN]:
    """The OpenAI completions `logprobs` object (tokens, token_logprobs, top_logprobs), checked whole."""
    none = ServedError(f"server at {url} gave no logprobs; it must support the completions 'logprobs' field")
    if not isinstance(logprobs, dict):
        raise none
    tokens, chosen, tops = (logprobs.get(k) for k in ("tokens", "token_logprobs", "top_logprobs"))
    if not isinstance(tokens, list) or not isinstance(chosen, list) or not isinstance(tops, list):
        raise none
    if not len(tokens) == len(chosen) == len(tops):
        raise ServedError(f"server at {url} gave logprobs of different lengths")
    offsets = logprobs.get("text_offset")
    if not (isinstance(offsets, list) and len(offsets) == len(tokens)
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        offsets = [None] * len(tokens)
    out = []
    for text, logprob, top, offset in zip(tokens, chosen, tops, offsets):
        if not isinstance(text, str):
            raise ServedError(f"server at {url} gave a token that is not text")
        text = clean_text(text)
        if logprob is None and top is None:      # the first prompt token, when echoed, has none
            out.append(TopN(text=text, logprob=float("nan"), top=[], offset=offset))
            continue
        try:
            value = _finite_logprob(logprob)
            if not isinstance(top, dict) or len(top) > 1000:
                raise ValueError
            pairs = sorted(((clean_text(t), _finite_logprob(v)) for t, v in top.items()), key=lambda p: -p[1])
        except ValueError:
            raise ServedError(f"server at {url} gave a logprob that is not a finite number at most 0") from None
        out.append(TopN(text=text, logprob=value, top=pairs, offset=offset))
    return out
