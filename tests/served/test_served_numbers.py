"""Which numbers a served trace holds, raw (before the server's sampler chain) or processed (after it), and
how that was learnt: llama.cpp is asked (post_sampling_probs false), vLLM is probed (its --logprobs-mode is
server-wide and no answer reports it), llama-cpp-python is named (it has no switch). Stand-ins play vLLM in
each mode (served_fixtures.vllm_like, which applies the chain by hand); the real llama-cpp-python server
shows its numbers are the model's own under settings that would change processed ones."""
from __future__ import annotations

import dataclasses
import math

import pytest

from engine.cli.main import main
from engine.config import DecodeConfig
from engine.errors import TraceFormatError
from engine.served import Server, ServedError
from engine.served.decode import served_decode
from engine.trace import Trace
from figures.served import NUMBERS, badge_text
from served_fixtures import VLLM_LOGITS, VLLM_MINUS_INF, vllm_like

COMPLETION = {"choices": [{"text": " a", "finish_reason": "length", "logprobs": {
    "tokens": [" a"], "text_offset": [2], "token_logprobs": [-0.5], "top_logprobs": [{" a": -0.5, " b": -1.5}]}}]}
SAMPLE = DecodeConfig(strategy="sample", temperature=0.5, top_k=3, seed=1, max_new_tokens=2, top_n=6)


def softmax_by_hand(scores: dict) -> dict:
    total = sum(math.exp(v) for v in scores.values())
    return {t: math.exp(v) / total for t, v in scores.items()}


def test_llama_cpp_is_asked_for_raw_numbers_in_every_request(stub_server):
    url = stub_server(COMPLETION, owned_by="llamacpp")
    server = Server.connect(url)
    for config in (SAMPLE, DecodeConfig(max_new_tokens=1), DecodeConfig(strategy="beam", num_beams=2,
                                                                         max_new_tokens=1)):
        trace = served_decode(server, "Hi", config)
        assert trace.model_facts["served"]["logprobs"] == "raw"
        assert trace.model_facts["served"]["logprobs_from"] == "asked"
    sent = stub_server.sent(url, "/v1/completions")
    assert len(sent) == 3 and all(body["post_sampling_probs"] is False for body in sent)    # no probe needed


def test_vllm_in_raw_mode_is_probed_once_and_its_numbers_are_shaped_here(stub_server):
    url = stub_server(vllm_like("raw_logprobs"), owned_by="vllm")
    server = Server.connect(url)
    [probe] = stub_server.sent(url, "/v1/completions")
    assert (probe["top_k"], probe["temperature"], probe["max_tokens"]) == (1, 1.0, 1)
    assert "post_sampling_probs" not in probe                  # vLLM has no such field
    trace = served_decode(server, "Hi", SAMPLE)
    assert len(stub_server.sent(url, "/v1/completions")) == 2
    assert (server.numbers, trace.model_facts["served"]["logprobs_from"]) == ("raw", "probed")
    raw = softmax_by_hand(VLLM_LOGITS)
    shaped = softmax_by_hand({t: v / 0.5 for t, v in sorted(VLLM_LOGITS.items(), key=lambda p: -p[1])[:3]})
    for cand in trace.steps[0].candidates:
        assert cand.prob == pytest.approx(raw[cand.text])
        assert cand.shaped_prob == pytest.approx(shaped.get(cand.text, 0.0))
    assert badge_text(trace, trace.steps[0]).startswith(f"top-6 from vllm at {url}, {NUMBERS['raw']}:")


def test_vllm_in_processed_mode_is_said_and_not_shaped_twice(stub_server):
    url = stub_server(vllm_like("processed_logprobs"), owned_by="vllm")
    trace = served_decode(Server.connect(url), "Hi", SAMPLE)
    assert trace.model_facts["served"]["logprobs"] == "processed"
    # what the server reported: temperature 0.5, then top-3, then normalised (vLLM's own order)
    processed = softmax_by_hand({t: v / 0.5 for t, v in sorted(VLLM_LOGITS.items(), key=lambda p: -p[1])[:3]})
    for cand in trace.steps[0].candidates:
        assert cand.prob == pytest.approx(processed.get(cand.text, 0.0))
        assert cand.shaped_prob == pytest.approx(cand.prob)       # the server shaped them; not again here
        assert cand.kept == (cand.text in processed)
        if cand.text not in processed:
            assert cand.logprob == VLLM_MINUS_INF
    badge = badge_text(trace, trace.steps[0])
    assert "PROCESSED numbers (after its sampler, not the model's own distribution)" in badge
    again = Trace.from_json(trace.to_json())                    # the reader takes the new field
    assert again.model_facts["served"]["logprobs"] == "processed"


@pytest.mark.parametrize("mode", ["raw_logits", "processed_logits"])
def test_a_vllm_that_returns_logits_is_refused_at_connect(stub_server, mode):
    url = stub_server(vllm_like(mode), owned_by="vllm")
    with pytest.raises(ServedError) as info:
        Server.connect(url)
    assert str(info.value) == (f"server at {url} returns logits, not log-probabilities (vLLM's --logprobs-mode "
                               "raw_logits or processed_logits); start it with --logprobs-mode raw_logprobs")


def test_another_server_is_unknown_unless_its_answer_shows_processed_numbers(stub_server):
    raw = Server.connect(stub_server(vllm_like("raw_logprobs"), owned_by="someone"))
    processed = Server.connect(stub_server(vllm_like("processed_logprobs"), owned_by="someone"))
    assert (raw.kind, raw.numbers, raw.numbers_from) == ("openai", "unknown", "probed")
    assert (processed.numbers, processed.numbers_from) == ("processed", "probed")


def test_the_cli_names_the_numbers(stub_server, capsys):
    for owner, mode, said in (("vllm", "processed_logprobs", "numbers: PROCESSED log-probabilities"),
                              ("llamacpp", "raw_logprobs", "numbers: raw log-probabilities")):
        url = stub_server(vllm_like(mode), owned_by=owner)
        assert main(["decode", "--server", url, "--prompt", "Hi", "--max-new-tokens", "1"]) == 0
        assert said in capsys.readouterr().out


def test_the_reader_checks_the_served_facts_and_reads_old_traces(stub_server):
    trace = served_decode(Server.connect(stub_server(COMPLETION, owned_by="llamacpp")), "Hi",
                          DecodeConfig(max_new_tokens=1))
    before = {k: v for k, v in trace.model_facts["served"].items() if not k.startswith("logprobs")}
    old = dataclasses.replace(trace, model_facts={"name": "m", "served": before})
    again = Trace.from_json(old.to_json())
    assert "logprobs" not in again.model_facts["served"]
    assert NUMBERS["unknown"] in badge_text(again, again.steps[0])
    for key, value, words in (("logprobs", "cooked", "'served.logprobs' must be one of raw, processed, unknown"),
                              ("logprobs", ["raw"], "'served.logprobs' must be text"),
                              ("logprobs_from", "guessed", "'served.logprobs_from' must be one of"),
                              ("url", "http://h/" + "x" * 3000, "'served.url' is 3,009 characters"),
                              ("top_n", 10**9, "'served.top_n' must be a whole number from 0 to 200")):
        bad = dataclasses.replace(trace, model_facts={**trace.model_facts,
                                         "served": {**trace.model_facts["served"], key: value}})
        with pytest.raises(TraceFormatError, match=words.replace("(", r"\(")):
            Trace.from_json(bad.to_json())


def test_llama_cpp_python_returns_the_models_own_numbers(llama_server):
    """Named, not probed: its source computes logprobs from the raw logits. Checked here with the probe's
    settings: under top-k 1 at temperature 1 processed numbers would put 0 on the top token."""
    from engine.served import numbers

    server = Server.connect(llama_server)
    assert (server.numbers, server.numbers_from) == ("raw", "named")
    _, [position], _ = server.complete(numbers.PROBE_PROMPT, **numbers.PROBE_SETTINGS)
    assert numbers.read_probe([lp for _, lp in position.top]) == "raw"
    assert position.top[0][1] < -0.1 and len(position.top) == numbers.PROBE_LISTED
    _, [greedy], _ = server.complete(numbers.PROBE_PROMPT, max_tokens=1, logprobs=numbers.PROBE_LISTED)
    for (text, lp), (text_g, lp_g) in zip(position.top, greedy.top):     # the same numbers at temperature 0
        assert text == text_g and lp == pytest.approx(lp_g, abs=0.05)
