"""The engine-specific samplers a served decode sends, in each server's spelling (llama.cpp's `/completion` field
names, llama-cpp-python's request fields, vLLM's OpenAI parameters), and the ones a server does not take, named
on the command line. The field names are those of the servers' own documentation, written out here."""
from __future__ import annotations

import json

from cli_helpers import run_cli
from engine.cli.main import main
from engine.config import DecodeConfig
from engine.served import Server
from engine.served.decode import served_decode

ANSWER = {"choices": [{"text": " a", "finish_reason": "length", "logprobs": {
    "tokens": [" a"], "text_offset": [2], "token_logprobs": [-0.5], "top_logprobs": [{" a": -0.5, " b": -1.5}]}}]}
LLAMA = DecodeConfig(strategy="sample", sampler_order="llama.cpp", max_new_tokens=1, presence_penalty=0.4,
                     frequency_penalty=0.3, penalty_last_n=128, dry_multiplier=0.8, dry_base=2.0,
                     dry_allowed_length=3, dry_penalty_last_n=256, dry_sequence_breakers='["\\n", "."]',
                     top_n_sigma=1.5, xtc_probability=0.5, xtc_threshold=0.2, typical_p=0.9, dynatemp_range=0.5,
                     dynatemp_exponent=1.5, samplers="top_k;typ_p;min_p;temperature")
# llama.cpp's server README (/completion options): the name of each field it reads
EXPECTED_LLAMA_CPP = {"presence_penalty": 0.4, "frequency_penalty": 0.3, "repeat_last_n": 128, "dry_multiplier": 0.8,
                      "dry_base": 2.0, "dry_allowed_length": 3, "dry_penalty_last_n": 256,
                      "dry_sequence_breakers": ["\n", "."], "top_n_sigma": 1.5, "xtc_probability": 0.5,
                      "xtc_threshold": 0.2, "typical_p": 0.9, "dynatemp_range": 0.5, "dynatemp_exponent": 1.5,
                      "mirostat": 0, "mirostat_tau": 5.0, "mirostat_eta": 0.1,
                      "samplers": ["top_k", "typ_p", "min_p", "temperature"]}


def sent(stub_server, url) -> dict:
    return stub_server.sent(url, "/v1/completions")[-1]


def test_llama_cpp_gets_every_sampler_in_its_own_field(stub_server):
    url = stub_server(ANSWER, owned_by="llamacpp")
    served_decode(Server.connect(url), "Hi", LLAMA)
    body = sent(stub_server, url)
    assert {k: body.get(k) for k in EXPECTED_LLAMA_CPP} == EXPECTED_LLAMA_CPP


def test_llama_cpp_gets_its_own_off_values_and_its_default_chain(stub_server):
    url = stub_server(ANSWER, owned_by="llamacpp")
    served_decode(Server.connect(url), "Hi", DecodeConfig(strategy="sample", sampler_order="llama.cpp",
                                                          max_new_tokens=1, mirostat=2, mirostat_tau=3.0))
    body = sent(stub_server, url)
    assert body["top_n_sigma"] == -1.0 and body["xtc_probability"] == 0.0 and body["dry_multiplier"] == 0.0
    assert body["typical_p"] == 1.0 and body["repeat_last_n"] == 64 and "samplers" not in body
    assert body["mirostat"] == 2 and body["mirostat_tau"] == 3.0


def test_a_greedy_decode_sends_no_stage_that_shapes_only_a_draw(stub_server):
    """llama.cpp's chain runs XTC before its temperature 0: sent on, it would set the top token aside."""
    url = stub_server(ANSWER, owned_by="llamacpp")
    served_decode(Server.connect(url), "Hi", LLAMA.replace(strategy="greedy"))
    body = sent(stub_server, url)
    assert body["temperature"] == 0.0 and body["xtc_probability"] == 0.0 and body["typical_p"] == 1.0
    assert body["top_n_sigma"] == -1.0 and body["dynatemp_range"] == 0.0 and "samplers" not in body
    assert body["presence_penalty"] == 0.4 and body["dry_multiplier"] == 0.8      # the history's stages stay


def test_llama_cpp_python_gets_what_it_applies(stub_server):
    """Its mirostat; not its penalties, which change nothing there (test_served_new_stages shows it)."""
    url = stub_server(ANSWER, owned_by="me")
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", max_new_tokens=1, presence_penalty=0.4,
                          frequency_penalty=0.3, mirostat=2, mirostat_tau=3.0, mirostat_eta=0.2)
    served_decode(Server.connect(url), "Hi", config)
    body = sent(stub_server, url)
    assert {k: body.get(k) for k in ("mirostat_mode", "mirostat_tau", "mirostat_eta")} == \
        {"mirostat_mode": 2, "mirostat_tau": 3.0, "mirostat_eta": 0.2}
    assert not {"typical_p", "dry_multiplier", "xtc_probability", "top_n_sigma", "repeat_last_n", "mirostat",
                "presence_penalty", "frequency_penalty"} & set(body)


def test_vllm_gets_its_openai_penalties_only(stub_server):
    url = stub_server(ANSWER, owned_by="vllm")
    config = DecodeConfig(strategy="sample", sampler_order="vllm", max_new_tokens=1, presence_penalty=0.4,
                          frequency_penalty=-0.3, repetition_penalty=1.1, min_p=0.05)
    served_decode(Server.connect(url), "Hi", config)
    body = sent(stub_server, url)
    assert (body["presence_penalty"], body["frequency_penalty"], body["repetition_penalty"], body["min_p"]) == \
        (0.4, -0.3, 1.1, 0.05)
    assert not {"typical_p", "dry_multiplier", "mirostat", "repeat_last_n", "repeat_penalty"} & set(body)


def test_the_cli_names_the_settings_a_server_ignored(stub_server, capsys, monkeypatch):
    url = stub_server(ANSWER, owned_by="me")
    code, out, err = run_cli(capsys, monkeypatch, main, [
        "decode", "--server", url, "--prompt", "Hi", "--strategy", "sample", "--sampler-order", "llama.cpp",
        "--max-new-tokens", "1", "--typical-p", "0.9", "--dry-multiplier", "0.8", "--presence-penalty", "0.5",
        "--penalty-last-n", "128"])
    assert code == 0, err
    note = [line for line in out.splitlines() if line.startswith("note: a llama-cpp-python server does not take")]
    assert len(note) == 1, out
    assert "--typical-p" in note[0] and "--dry-multiplier" in note[0] and "--penalty-last-n" in note[0]
    assert "--presence-penalty" in note[0] and "--mirostat" not in note[0]


def test_the_cli_names_no_setting_when_the_server_takes_them_all(stub_server, capsys, monkeypatch):
    url = stub_server(ANSWER, owned_by="llamacpp")
    code, out, err = run_cli(capsys, monkeypatch, main, [
        "decode", "--server", url, "--prompt", "Hi", "--strategy", "sample", "--sampler-order", "llama.cpp",
        "--max-new-tokens", "1", "--typical-p", "0.9", "--dry-multiplier", "0.8", "--xtc-probability", "0.5"])
    assert code == 0, err
    assert "does not take" not in out
    assert json.loads(json.dumps(sent(stub_server, url)))["xtc_probability"] == 0.5
