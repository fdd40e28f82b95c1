"""A model server that misbehaves, one fault per case (tests/hostile_servers.py: raw bytes on a socket), met
by the engine call the app's served pages make (Server.connect, then served_decode) and by the command line,
in this process and as real processes. Every fault ends in one line that names the server and the cause
(exit status 2 at the command line), within the request's deadline; a field of the wrong type that can be
read safely (owned_by) does not stop the decode, and a decode cut short keeps the steps it received."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hostile_servers as hs
from tiers import spread
from engine import Trace
from engine.cli.main import main
from engine.config import DecodeConfig
from engine.served import ServedError, Server
from engine.served.decode import served_decode
from engine.served.teacher import served_teacher_force

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 2.0          # the CLI's --timeout and the engine's: each case's deadline
MARGIN_S = 60.0          # a loaded 2-core machine starting Python and torch; not a limit on the client


def on(path: str, answer, otherwise=hs.well_formed):
    """A fault on one path; the others answer well."""
    def fault(method, path_, payload):
        if path_ == path:
            return answer(payload) if callable(answer) else answer
        return otherwise(method, path_, payload)
    return fault


def forever(head: bytes, piece: bytes, pause: float):
    """An answer that never ends: `head`, then `piece` again and again, `pause` seconds apart."""
    yield head
    while True:
        yield piece
        yield pause


def slowly(answer: bytes, pause: float = 0.5):
    """`answer` one byte at a time, `pause` seconds apart."""
    for i in range(len(answer)):
        yield answer[i:i + 1]
        yield pause


def beam_step(top: dict, finish="length"):
    """A completion of one token (for the beam search, which asks for one at a time) with this top list."""
    text, lp = max(top.items(), key=lambda kv: kv[1]) if top else (" a", -0.5)
    return hs.http({"choices": [{"text": text, "finish_reason": finish, "logprobs": {
        "tokens": [text], "token_logprobs": [lp], "top_logprobs": [top], "text_offset": [0]}}]})


def huge_logprob(payload):
    events = hs.event({"choices": [{"text": " a", "finish_reason": "length", "logprobs": {
        "tokens": [" a"], "token_logprobs": [-(10 ** 400)], "top_logprobs": [{" a": -0.5}]}}]})
    return hs.events_head() + events


def infinite_logprob(payload):
    body = (b'data: {"choices": [{"text": " a", "finish_reason": "length", "logprobs": {"tokens": [" a"], '
            b'"token_logprobs": [-1e999], "top_logprobs": [{" a": -1e999}]}}]}\n\n')
    return hs.events_head() + body


class Changing:
    """A server whose answers change from one request to the next: the first beam step lists four tokens,
    every later one only the end of text, as finished."""

    def __init__(self):
        self.count = 0

    def __call__(self, payload):
        self.count += 1
        if self.count == 1:
            return beam_step({" a": -0.5, " b": -1.0, " c": -2.0, " d": -3.0})
        return beam_step({"": -0.1}, finish="stop")


class Fresh:
    """A fault with state, made anew for each server."""

    def __init__(self, make):
        self.make = make


ESC_NAME = "\x1b]0;owned\x07\x1b[2J" + hs.MODEL
SURROGATE = [(" \ud83d", -0.25), (" b", -0.5), (" c", -1.0)]
BIG_HEADER = b"X-Big: " + b"a" * 65_536 + b"\r\n"
MANY_HEADERS = b"".join(b"X-H%d: %d\r\n" % (i, i) for i in range(101))

# name -> (fault, extra CLI arguments, None for a whole decode or the words its one error line holds)
FAULTS = {
    "garbled status line": (on("/v1/models", b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\n{}"), [],
                            ["not valid HTTP"]),
    "status line without a code": (on("/v1/models", b"HTTP/1.1\r\n\r\n{}"), [], ["not valid HTTP"]),
    "status code below 100": (on("/v1/models", hs.http({"error": "odd"}, status=b"099 Odd")), [],
                              ["not valid HTTP"]),
    "informational answer and nothing after": (on("/v1/models", b"HTTP/1.1 103 Early Hints\r\n\r\n"), [],
                                               ["not valid HTTP"]),
    "64 KB header": (on("/v1/models", hs.http(hs.models(), headers=BIG_HEADER)), [], ["header line over 64 KiB"]),
    "200 KB header": (on("/v1/models", hs.http(hs.models(), headers=BIG_HEADER * 3)), [], ["not valid HTTP"]),
    "101 headers": (on("/v1/models", hs.http(hs.models(), headers=MANY_HEADERS)), [], ["headers; the limit is 100"]),
    "broken chunked body": (on("/v1/models", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n"),
                            [], ["not valid HTTP"]),
    "chunked body cut off": (on("/v1/models", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{\"data"),
                             [], ["not valid HTTP"]),
    "HTTP/0.9 answer": (on("/v1/models", json.dumps(hs.models()).encode()), [], ["not valid HTTP"]),
    "a byte a second": (on("/v1/models", lambda p: slowly(hs.http(hs.models()))), [],
                        [f"did not answer within {TIMEOUT_S:g} s"]),
    "body a byte a second": (on("/v1/completions", lambda p: [hs.events_head(), *slowly(b": " + b"x" * 200)]), [],
                             [f"did not answer within {TIMEOUT_S:g} s"]),
    "stream of pings": (on("/v1/completions", lambda p: forever(hs.events_head(), b": ping\n\n", 0.05)), [],
                        [f"did not answer within {TIMEOUT_S:g} s"]),
    "stream of empty events": (on("/v1/completions", lambda p: forever(hs.events_head(), b"data: \n\n", 0.05)),
                               [], [f"did not answer within {TIMEOUT_S:g} s"]),
    "stream of tokenless events": (on("/v1/completions", lambda p: forever(hs.events_head(), hs.event(
        {"choices": [{"text": "", "finish_reason": None, "logprobs": None}]}), 0.05)), [],
        [f"did not answer within {TIMEOUT_S:g} s"]),
    "owned_by a list": (on("/v1/models", hs.http(hs.models(owned_by=["vllm"]))), [], None),
    "owned_by a dict": (on("/v1/models", hs.http(hs.models(owned_by={"name": "vllm"}))), [], None),
    "400-digit logprob": (on("/v1/completions", huge_logprob), [], ["not a finite number"]),
    "infinite logprob": (on("/v1/completions", infinite_logprob), ["--json", "-"], ["not a finite number"]),
    "empty top list in a beam step": (on("/v1/completions", lambda p: beam_step({})),
                                      ["--strategy", "beam", "--num-beams", "2"], ["no candidates for beam 1"]),
    "answers that change between requests": (Fresh(lambda: on("/v1/completions", Changing())),
                                             ["--strategy", "beam", "--num-beams", "2"], None),
    "escapes in a model name": (on("/v1/models", hs.http(hs.models(names=[ESC_NAME, "second"]))), [],
                                ["serves 2 models; name one", "\\x1b]0;owned\\x07\\x1b[2J"]),
    "escapes in an error body": (on("/v1/completions", hs.http({"error": {"message": "\x1b[31mred\x1b[0m\x9b"}},
                                                               status=b"500 Internal Server Error")), [],
                                 ["HTTP 500", "\\x1b[31mred\\x1b[0m\\x9b"]),
    "stream cut after two tokens": (on("/v1/completions", hs.events_head() + hs.token_events(hs.TOKENS[:2])), [],
                                    ["after 2 tokens", "cut short"]),
    "not a stream": (on("/v1/completions", lambda p: hs.http(hs.completion(hs.TOKENS))), [],
                     ["not a stream of events"]),
}


@pytest.fixture
def raw_server():
    servers = []

    def start(fault):
        servers.append(hs.RawServer(fault))
        return servers[-1].url

    yield start
    for server in servers:
        server.close()


def fresh(name):
    """The case's fault, made anew where it counts requests."""
    fault, args, words = FAULTS[name]
    return (fault.make() if isinstance(fault, Fresh) else fault), args, words


def config_of(args) -> DecodeConfig:
    beam = "beam" in args
    return DecodeConfig(strategy="beam" if beam else "greedy", num_beams=2 if beam else 1, max_new_tokens=3)


# ---- the engine call the app makes ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_the_engine_meets_each_fault_with_one_line_naming_the_server(raw_server, name):
    fault, args, words = fresh(name)
    url = raw_server(fault)
    model = args[args.index("--model") + 1] if "--model" in args else None
    try:
        trace = served_decode(Server.connect(url, model, timeout=TIMEOUT_S), "The capital of France is",
                              config_of(args))
    except ServedError as exc:
        assert words is not None, f"a whole decode was refused: {exc}"
        message = str(exc)
        assert message.startswith(f"server at {url} ") and "\n" not in message
        assert all(word in message for word in words), message
        assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in message), message
        return
    assert words is None, f"the fault was not noticed: {words}"
    assert trace.steps and Trace.from_json(trace.to_json()).steps == trace.steps


def test_owned_by_of_another_type_is_an_unknown_server(raw_server):
    for owner in (["vllm"], {"name": "vllm"}, 7, None):
        url = raw_server(on("/v1/models", hs.http(hs.models(owned_by=owner))))
        assert Server.connect(url).kind == "openai"


def test_a_stream_cut_short_keeps_the_steps_it_received(raw_server):
    url = raw_server(on("/v1/completions", hs.events_head() + hs.token_events(hs.TOKENS[:2])))
    with pytest.raises(ServedError, match="after 2 tokens") as info:
        served_decode(Server.connect(url), "Hi", DecodeConfig(max_new_tokens=5))
    partial = info.value.trace
    assert [s.chosen_texts[0] for s in partial.steps] == [t for t, _ in hs.TOKENS[:2]]
    assert [round(s.chosen.logprob, 6) for s in partial.steps] == [lp for _, lp in hs.TOKENS[:2]]
    assert partial.sequences[0].text == "".join(t for t, _ in hs.TOKENS[:2])


def test_lone_surrogates_in_token_texts_are_replaced(raw_server):
    url = raw_server(on("/v1/completions", lambda p: hs.stream(SURROGATE)))
    trace = served_decode(Server.connect(url), "Hi", DecodeConfig(max_new_tokens=3))
    assert [s.chosen_texts[0] for s in trace.steps] == [" \ufffd", " b", " c"]
    trace.to_json().encode("utf-8")           # would raise on a lone surrogate


def test_teacher_forcing_meets_rows_that_do_not_fit_the_prompt_with_one_line(raw_server):
    """vLLM's prompt_logprobs with fewer rows than the echoed prompt has tokens: the answers do not fit."""
    echoed = {"choices": [{"text": "", "finish_reason": "length", "logprobs": {
        "tokens": ["Hi", " there", " you"], "token_logprobs": [None, -1.0, -2.0],
        "top_logprobs": [None, {" there": -1.0}, {" you": -2.0}], "text_offset": [0, 2, 8]}}]}
    rows = {"choices": [{"text": "", "finish_reason": "length", "prompt_logprobs": [None]}]}

    def completions(payload):
        if not payload.get("echo") and "prompt_logprobs" not in payload:     # connect's probe of its numbers
            return hs.http(hs.completion(hs.TOKENS[:1], top=[{" Paris": -0.25, ".": -2.0}]))
        return hs.http(rows if "prompt_logprobs" in payload else echoed)

    url = raw_server(on("/v1/completions", completions, lambda m, p, b: hs.http(hs.models(owned_by="vllm"))
                        if p == "/v1/models" else hs.http({"error": "no"}, status=b"404 Not Found")))
    with pytest.raises(ServedError, match=f"server at {url} gave prompt_logprobs for 1 tokens"):
        served_teacher_force(Server.connect(url), "Hi", " there you")


# ---- the command line, in this process and as processes -------------------------------------------------
def cli_args(url, args):
    return ["decode", "--prompt", "The capital of France is", "--server", url, "--timeout", f"{TIMEOUT_S:g}",
            "--max-new-tokens", "3", *args]


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_the_command_line_meets_each_fault_with_one_line(raw_server, capsys, name):
    fault, args, words = fresh(name)
    url = raw_server(fault)
    capsys.readouterr()
    code = main(cli_args(url, args))
    out, err = capsys.readouterr()
    check_cli(code, out, err, url, args, words)


def check_cli(code, out, err, url, args, words):
    assert "Traceback" not in err
    if words is None:
        assert code == 0 and err == "", err
        assert out.splitlines()[0].split() == ["step", "chosen", "prob", "top", "5"]
        return
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: server at {url} ") and all(word in lines[0] for word in words), lines[0]
    assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in err.rstrip("\n")), err
    if "--json" in args:
        assert out == "", "a trace was written for a decode that failed"


def test_the_command_line_prints_the_steps_a_cut_stream_gave_then_the_error(raw_server, capsys):
    url = raw_server(on("/v1/completions", hs.events_head() + hs.token_events(hs.TOKENS[:2])))
    code = main(cli_args(url, []))
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "after 2 tokens" in err
    rows = out.splitlines()[1:4]
    assert rows[0].startswith("   1  ' Paris'") and rows[1].startswith("   2  .") and rows[2] == ""


def test_token_texts_with_lone_surrogates_give_json_in_utf8(raw_server, capfdbinary):
    url = raw_server(on("/v1/completions", lambda p: hs.stream(SURROGATE)))
    code = main(cli_args(url, ["--json", "-"]))
    sys.stdout.flush()
    out = capfdbinary.readouterr().out
    assert code == 0
    trace = Trace.from_json(out.decode("utf-8"))
    assert [s.chosen_texts[0] for s in trace.steps] == [" \ufffd", " b", " c"]


IN_PROCESSES = ("garbled status line", "stream of pings", "escapes in an error body", "owned_by a dict")


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_real_processes_meet_faults_with_one_line_and_status_2(raw_server):
    """One case of each kind (HTTP itself, the deadline, server text, a field of another type) as a real
    `python -m engine decode --server ...`, all started at once: each one's Python and torch start-up is the
    slow part, so the others run in this process above. Status 2 and one line, or a whole decode; each
    ends within its --timeout plus a generous margin."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    running = {}
    for name in spread(IN_PROCESSES, 2):
        fault, args, words = fresh(name)
        url = raw_server(fault)
        running[name] = (subprocess.Popen([sys.executable, "-m", "engine", *cli_args(url, args)], cwd=ROOT, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), url, args, words)
    for name, (process, url, args, words) in running.items():
        try:
            out, err = process.communicate(timeout=TIMEOUT_S + MARGIN_S * 3)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"{name}: the process was still running")
        check_cli(process.returncode, out, err, url, args, words)
