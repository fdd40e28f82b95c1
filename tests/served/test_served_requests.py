"""What DecodeScope asks a server for: every sampling setting sent explicitly (llama.cpp's own defaults,
top-k 40, top-p 0.95, min-p 0.05, would otherwise shape the run silently), in each server's spelling, and
top-N capped where vLLM caps it."""
from __future__ import annotations

from engine.config import DecodeConfig
from engine.served import Server
from engine.served.decode import served_decode

ANSWER = {"choices": [{"text": " a", "finish_reason": "length", "logprobs": {
    "tokens": [" a"], "text_offset": [2], "token_logprobs": [-0.5], "top_logprobs": [{" a": -0.5, " b": -1.5}]}}]}


def _completion_requests(stub_server, url):
    return stub_server.sent(url, "/v1/completions")


def test_llama_cpp_gets_every_setting_in_its_own_spelling(stub_server):
    url = stub_server(ANSWER, owned_by="llamacpp")
    config = DecodeConfig(strategy="sample", temperature=0.7, top_k=0, top_p=0.9, min_p=0.0,
                          repetition_penalty=1.2, seed=5, max_new_tokens=1, top_n=30)
    served_decode(Server.connect(url), "Hi", config)
    [sent] = _completion_requests(stub_server, url)
    assert sent["top_k"] == 0 and sent["top_p"] == 0.9 and sent["min_p"] == 0.0       # 0 = off on llama.cpp
    assert sent["temperature"] == 0.7 and sent["seed"] == 5 and sent["repeat_penalty"] == 1.2
    assert sent["logprobs"] == 30 and sent["max_tokens"] == 1 and sent["prompt"] == "Hi"
    assert sent["post_sampling_probs"] is False         # asked for the raw distribution, which the figures read


def test_vllm_gets_its_spelling_and_its_top_n_cap(stub_server):
    url = stub_server(ANSWER, owned_by="vllm")
    trace = served_decode(Server.connect(url), "Hi", DecodeConfig(max_new_tokens=1, top_n=50))
    probe, sent = _completion_requests(stub_server, url)         # connect's probe of its numbers, then the decode
    assert probe["top_k"] == 1 and probe["temperature"] == 1.0 and probe["max_tokens"] == 1
    assert sent["top_k"] == -1 and sent["repetition_penalty"] == 1.0 and "repeat_penalty" not in sent
    assert sent["temperature"] == 0.0 and "seed" not in sent                        # greedy
    assert sent["logprobs"] == 20 and trace.config.top_n == 20
    assert trace.model_facts["served"]["server"] == "vllm" and trace.model_facts["served"]["top_n"] == 20
    step = trace.steps[0]
    assert [c.text for c in step.candidates] == [" a", " b"] and step.chosen_texts == [" a"]
    # ids: vLLM's /tokenize is absent here, so the texts get ids above every real vocabulary, one per text
    assert len({c.token_id for c in step.candidates}) == 2 and min(c.token_id for c in step.candidates) >= 2**30
