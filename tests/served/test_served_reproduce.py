"""N identical temperature-0 requests to a server: distinct completions counted, where they part, and the
server's own top-2 log-probability margin there. Counted on canned answers from a stand-in server (which answer
each request gets is set by hand), and once against the real llama.cpp server on the bundled SmolLM2."""
from __future__ import annotations

import itertools
import threading

import pytest

from engine import ConfigError
from engine.reproduce.served import distinct_completions, first_divergence, send_identical
from engine.served import Server, ServedError


def answer(tokens: list, tops: list) -> dict:
    return {"choices": [{"text": "".join(tokens), "finish_reason": "length", "logprobs": {
        "tokens": tokens, "token_logprobs": [top[t] for t, top in zip(tokens, tops)], "top_logprobs": tops}}]}


# the most common answer " New York City." and, less often, " New York, Queens" (parting at token 2, where the
# server's top two were -0.70 and -0.75: a margin of 0.05), and once " Boston." (parting at token 0)
CITY = answer([" New", " York", " City", "."], [{" New": -0.1, " Boston": -2.4}, {" York": -0.01, " Jersey": -5.0},
                                                 {" City": -0.70, ",": -0.75}, {".": -0.2, "!": -2.0}])
QUEENS = answer([" New", " York", ",", " Queens"], [{" New": -0.1, " Boston": -2.4}, {" York": -0.01, " Jersey": -5.0},
                                                    {",": -0.72, " City": -0.73}, {" Queens": -0.3, " NY": -1.9}])
BOSTON = answer([" Boston", "."], [{" Boston": -0.5, " New": -0.6}, {".": -0.1, ",": -2.0}])


def in_turn(*answers):
    """A completion function that gives the answers in this order, over and over (thread-safe)."""
    lock, turns = threading.Lock(), itertools.cycle(answers)

    def complete(payload):
        with lock:
            return next(turns)
    return complete


def test_distinct_completions_are_counted_and_placed(stub_server):
    url = stub_server(in_turn(CITY, CITY, QUEENS, CITY, BOSTON, CITY, QUEENS, CITY), owned_by="llamacpp")
    [level] = send_identical(Server.connect(url), "Richard Feynman was born in", 8, (1,), 4)
    found = distinct_completions(level.completions)
    assert [(d.completion.text, d.count) for d in found] == [(" New York City.", 5), (" New York, Queens", 2),
                                                             (" Boston.", 1)]
    assert [d.parts_at for d in found] == [None, 2, 0]
    assert found[1].margin == pytest.approx(0.05) and found[2].margin == pytest.approx(2.3)
    assert first_divergence(level.completions) == 0
    assert first_divergence([c for c in level.completions if c.text != " Boston."]) == 2


def test_every_request_is_greedy_with_two_top_logprobs_and_levels_send_n_each(stub_server):
    url = stub_server(in_turn(CITY), owned_by="llamacpp")
    levels = send_identical(Server.connect(url), "Hi", 5, (1, 4), 4)
    assert [len(level.completions) for level in levels] == [5, 5]
    assert [len(level.distinct) for level in levels] == [1, 1]             # one completion: said as such
    assert first_divergence(levels[1].completions) is None
    sent = stub_server.sent(url, "/v1/completions")
    assert len(sent) == 10 and all(s["temperature"] == 0.0 and s["logprobs"] == 2 and s["prompt"] == "Hi"
                                   and s["max_tokens"] == 4 for s in sent)


def test_a_completion_shorter_than_another_parts_where_it_ends(stub_server):
    short = answer([" New", " York"], [{" New": -0.1, " Boston": -2.4}, {" York": -0.01, " Jersey": -5.0}])
    url = stub_server(in_turn(CITY, short), owned_by="llamacpp")
    [level] = send_identical(Server.connect(url), "Hi", 3, (2,), 4)
    found = distinct_completions(level.completions)
    assert [d.count for d in found] == [2, 1] and found[1].parts_at == 2


@pytest.mark.parametrize("requests,levels,tokens,named", [(0, (1,), 4, "requests"), (65, (1,), 4, "requests"),
                                                          (4, (), 4, "concurrency"), (4, (1, 17), 4, "concurrency"),
                                                          (4, (1, 2, 3, 4, 5, 6), 4, "concurrency"),
                                                          (4, (1,), 0, "max tokens"), (4, (1,), 129, "max tokens")])
def test_the_plan_is_bounded_before_any_request(stub_server, requests, levels, tokens, named):
    url = stub_server(in_turn(CITY), owned_by="llamacpp")
    server = Server.connect(url)
    with pytest.raises(ConfigError, match=named):
        send_identical(server, "Hi", requests, levels, tokens)
    assert stub_server.sent(url, "/v1/completions") == []


def test_an_answer_without_logprobs_is_one_line(stub_server):
    url = stub_server({"choices": [{"text": "x", "finish_reason": "length"}]}, owned_by="llamacpp")
    with pytest.raises(ServedError, match="logprobs"):
        send_identical(Server.connect(url), "Hi", 2, (2,), 4)


def test_the_bundled_llama_cpp_server(llama_server):
    """What the bundled llama.cpp server (llama-cpp-python, one slot) does with 6 identical greedy requests, one
    and three at a time: every completion is counted, and the counts add up. Whether they differ is the server's
    business; on this machine it gave 1 distinct completion at each level (its requests wait for one slot)."""
    server = Server.connect(llama_server)
    levels = send_identical(server, "The capital of France is", 6, (1, 3), 8)
    for level in levels:
        assert len(level.completions) == 6
        found = level.distinct
        assert sum(d.count for d in found) == 6 and found[0].parts_at is None
        assert all(len(c.tops) == len(c.tokens) > 0 for c in level.completions)
        assert all(len(top.top) >= 2 for c in level.completions for top in c.tops)
        for d in found[1:]:
            assert d.parts_at is not None
        print(f"concurrency {level.concurrency}: {len(found)} distinct completion(s) "
              f"{[d.count for d in found]}, first divergence {first_divergence(level.completions)}")
