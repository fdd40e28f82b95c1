"""What a user meets when a server is wrong: one line that names the server and the cause, in the engine
and the CLI. The addresses are checked whole before any request leaves."""
from __future__ import annotations

import pytest

from served_helpers import free_port
from engine.cli.main import main
from engine.served import ServedError, Server, check_url


@pytest.mark.parametrize("url, reason", [
    ("", "empty"),
    ("ftp://127.0.0.1:8000", "http:// or https://"),
    ("http://", "no host"),
    ("http://user:secret@127.0.0.1:8000", "user name or password"),
    ("http://127.0.0.1:8000/?x=1", "query"),
    ("http://127.0.0.1:99999", "bad port"),
    ("http://127.0.0.1:8000/\n", None),
    ("http://exa mple.org", "spaces or control characters"),
    ("http://" + "a" * 3000 + ".org", "limit is 2,000"),
])
def test_addresses_are_checked_whole(url, reason):
    if reason is None:                        # a trailing newline is only whitespace around the address
        assert check_url(url) == "http://127.0.0.1:8000"
        return
    with pytest.raises(ServedError, match=reason):
        check_url(url)


def test_a_trailing_v1_is_the_same_server():
    assert check_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert check_url(" https://host.example/api/v1 ") == "https://host.example/api"


def test_server_down_is_one_line():
    port = free_port()           # nothing listens there
    with pytest.raises(ServedError, match=rf"server at http://127.0.0.1:{port} is not running \(connection refused\)"):
        Server.connect(f"http://127.0.0.1:{port}")


def test_a_silent_server_times_out(stub_server):
    url = stub_server("silent", silence_s=3.0)
    server = Server.connect(url, timeout=0.5)
    with pytest.raises(ServedError, match=r"did not answer within 0.5 s"):
        server.complete("Hello", max_tokens=1, logprobs=5)


def test_a_model_the_server_lacks_is_named_with_what_it_has(stub_server):
    url = stub_server({})
    with pytest.raises(ServedError, match=r"has no model named 'llama-70b'; it serves: 'stub-model'"):
        Server.connect(url, "llama-70b")


def test_a_server_without_logprobs_is_said(stub_server):
    url = stub_server({"choices": [{"text": " Paris", "finish_reason": "length", "logprobs": None}]})
    server = Server.connect(url)
    with pytest.raises(ServedError, match="gave no logprobs"):
        server.complete("The capital of France is", max_tokens=1, logprobs=5)


@pytest.mark.parametrize("logprobs, reason", [
    ({"tokens": [" a"], "token_logprobs": [0.5], "top_logprobs": [{" a": 0.5}]}, "at most 0"),
    ({"tokens": [" a"], "token_logprobs": ["x"], "top_logprobs": [{" a": -1.0}]}, "at most 0"),
    ({"tokens": [" a", " b"], "token_logprobs": [-1.0], "top_logprobs": [{" a": -1.0}]}, "different lengths"),
    ({"tokens": [7], "token_logprobs": [-1.0], "top_logprobs": [{" a": -1.0}]}, "not text"),
])
def test_a_malformed_answer_is_refused_whole(stub_server, logprobs, reason):
    url = stub_server({"choices": [{"text": " a", "finish_reason": "length", "logprobs": logprobs}]})
    with pytest.raises(ServedError, match=reason):
        Server.connect(url).complete("x", max_tokens=1, logprobs=5)


def test_cli_names_the_server_problem_in_one_line(capsys):
    port = free_port()
    code = main(["decode", "--prompt", "Hi", "--server", f"http://127.0.0.1:{port}", "--max-new-tokens", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [f"error: server at http://127.0.0.1:{port} is not running (connection refused)"]


@pytest.mark.parametrize("flag", [["--device", "cpu"], ["--dtype", "float16"], ["--chat"]])
def test_cli_refuses_local_placement_with_a_server(capsys, flag):
    code = main(["decode", "--prompt", "Hi", "--server", "http://127.0.0.1:1", *flag])
    err = capsys.readouterr().err
    assert code == 2 and "leave" in err and "--server" in err and "Traceback" not in err


def test_soft_decoding_is_refused_on_a_server(stub_server):
    from engine.config import DecodeConfig
    from engine.served.decode import served_decode

    url = stub_server({})
    with pytest.raises(ServedError, match="soft decoding feeds a vector back"):
        served_decode(Server.connect(url), "Hi", DecodeConfig(strategy="soft"))


def test_a_stream_cut_short_is_said_not_passed_off_as_the_whole_answer(stub_server):
    from engine.config import DecodeConfig
    from engine.served.decode import served_decode

    cut = {"choices": [{"text": " a", "finish_reason": None, "logprobs": {
        "tokens": [" a"], "text_offset": [2], "token_logprobs": [-0.5], "top_logprobs": [{" a": -0.5}]}}]}
    url = stub_server(cut)
    with pytest.raises(ServedError, match="ended the answer after 1 tokens without a reason"):
        served_decode(Server.connect(url), "Hi", DecodeConfig(max_new_tokens=5))
