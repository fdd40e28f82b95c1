"""Teacher forcing on a served model: on a real llama.cpp server (one request per position) against
transformers on the same weights, and on a stand-in vLLM answering in its documented prompt_logprobs format
(numbers worked out by hand)."""
from __future__ import annotations

import math

import pytest

from engine import load_model
from engine.errors import ConfigError
from engine.served import Server
from engine.served.teacher import served_teacher_force
from engine.inside.teacher import teacher_force
from served_fixtures import vllm_like
from served_helpers import QUANTISED_CLOSE

PROMPT, REFERENCE = "The capital of France is", " Paris. It is a big city."


def test_each_reference_token_scored_as_transformers_scores_it(llama_server):
    served = served_teacher_force(Server.connect(llama_server), PROMPT, REFERENCE, top_n=20)
    local = teacher_force(load_model(), PROMPT, REFERENCE)
    assert [p.token_id for p in served.positions] == [p.token_id for p in local.positions]
    assert "".join(p.text for p in served.positions) == REFERENCE
    assert served.requests == 1 + len(local.positions) and not served.exact
    for mine, theirs in zip(served.positions, local.positions):
        if mine.index in served.bounded:      # outside the server's top 20: an upper bound, and the rank says so
            assert theirs.rank > 20 and mine.rank == 21
            assert mine.logprob >= theirs.logprob - QUANTISED_CLOSE
        else:
            assert mine.logprob == pytest.approx(theirs.logprob, abs=QUANTISED_CLOSE)
            assert mine.rank == theirs.rank
    assert served.logprob == pytest.approx(sum(p.logprob for p in served.positions))


def test_a_reference_that_merges_with_the_prompt_is_refused(llama_server):
    with pytest.raises(ConfigError, match="merges with the prompt"):
        served_teacher_force(Server.connect(llama_server), "The capital of France is Par", "is.")


def test_vllm_prompt_logprobs_score_every_token_in_one_request(stub_server):
    # prompt "ab" + reference "cd": tokens a(1) b(2) c(3) d(4); vLLM scores each prompt token after the first
    def completion(payload):
        if "prompt_logprobs" not in payload and not payload.get("echo"):
            return vllm_like()(payload)               # connect's probe of which numbers the server returns
        if payload.get("echo"):
            return {"choices": [{"text": "abcd!", "finish_reason": "length", "logprobs": {
                "tokens": ["a", "b", "c", "d", "!"], "text_offset": [0, 1, 2, 3, 4],
                "token_logprobs": [None, -1.0, -2.0, -0.5, -0.1],
                "top_logprobs": [None, {"b": -1.0}, {"c": -2.0}, {"d": -0.5}, {"!": -0.1}]}}]}
        assert payload["prompt_logprobs"] == 20 and payload["prompt"] == "abcd"
        return {"choices": [{"text": "!", "finish_reason": "length", "prompt_logprobs": [
            None,
            {"2": {"logprob": -1.0, "rank": 2, "decoded_token": "b"},
             "9": {"logprob": -0.6, "rank": 1, "decoded_token": "x"}},
            {"3": {"logprob": -2.0, "rank": 3, "decoded_token": "c"},
             "9": {"logprob": -1.0, "rank": 1, "decoded_token": "x"},
             "8": {"logprob": -1.5, "rank": 2, "decoded_token": "y"}},
            {"4": {"logprob": -0.5, "rank": 1, "decoded_token": "d"}},
        ]}]}

    url = stub_server(completion, owned_by="vllm",
                      tokenize=lambda text: [{"a": 1, "b": 2, "c": 3, "d": 4}[c] for c in text])
    result = served_teacher_force(Server.connect(url), "ab", "cd")
    assert result.exact and result.requests == 2 and result.bounded == []
    assert [(p.token_id, p.text, p.rank) for p in result.positions] == [(3, "c", 3), (4, "d", 1)]
    assert [p.logprob for p in result.positions] == [-2.0, -0.5]
    assert result.logprob == -2.5
    assert [n.text for n in result.positions[0].top] == ["x", "y", "c"]
    # the listed mass at c: e^-1 + e^-1.5 + e^-2, the rest one bucket
    probs = [math.exp(-1.0), math.exp(-1.5), math.exp(-2.0)]
    rest = 1 - sum(probs)
    want = -sum(p * math.log(p) for p in probs) - rest * math.log(rest)
    assert result.positions[0].entropy == pytest.approx(want)
