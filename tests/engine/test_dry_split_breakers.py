"""DRY's sequence breakers split over tokens (llama.cpp's get_overlapping_token_sequences and "Step 1" of
llama_sampler_dry_apply), on a hand-made vocabulary and tokenizer: the breaker "ab c" is the token "ab c" or
the token "xa" followed by "b c", or "xab" followed by " c". Penalties are computed by hand from zero logits
(base 2, allowed length 2, multiplier 1: a run of r costs 2 ** (r - 2))."""
from __future__ import annotations

import pytest
import torch

from engine import DecodeConfig
from engine.samplers import llama as ll
from engine.samplers.chain import prepare
from engine.decoding.decoder import Decoder

TEXTS = ["p", "q", "r", "s", "xa", "b c", "t", "ab c", "xab", " c", "d"]
P, Q, R, S, XA, BC, T, ABC, XAB, C, D = range(11)
PIECES = {"b c": [BC], " c": [C], "b cd": [BC, D], " cd": [C, D], "d": [D]}


class FakeTokenizer:
    """Text -> ids for the rests of the breakers used here; anything else is a test error. Counts its calls."""

    def __init__(self):
        self.calls: list = []

    def __call__(self, text: str) -> list:
        self.calls.append(text)
        return list(PIECES[text])


def penalties(context: list, breakers: list, tokenize=None, texts=TEXTS) -> tuple:
    """(the score each token loses after `context`, the stage's state) for DRY with base 2 and allowed length 2."""
    stage = ll.Dry(1.0, 2.0, 2, -1, breakers)
    prepare([stage], token_texts=list(texts), tokenize=tokenize)
    out = stage(torch.tensor([context]), torch.zeros(1, len(texts)))
    return [round(-float(x), 6) for x in out[0]], stage.state()


def lost(**by_token) -> list:
    out = [0.0] * len(TEXTS)
    for name, value in by_token.items():
        out[globals()[name]] = value
    return out


def test_the_scan_finds_whole_breakers_and_the_heads_of_split_ones():
    tokenize = FakeTokenizer()
    found = ll.scan_breakers(TEXTS, ("ab c",), tokenize)
    # "xa" ends with "a": rest "b c"; "xab" ends with "ab": rest " c"; "ab c" holds it whole
    assert found.whole == {ABC}
    assert found.tails == {XA: ((BC,),), XAB: ((C,),)}
    assert sorted(tokenize.calls) == [" c", "b c"]                  # each rest tokenized once
    assert ll.scan_breakers(TEXTS, ("ab c",)) == ll.BreakerTokens(frozenset({ABC}), {})   # no tokenizer: whole only
    # a breaker of one character can never be split: the tokenizer is not asked
    assert ll.scan_breakers(TEXTS, ("a", "\n"), tokenize).whole == {XA, ABC, XAB} and len(tokenize.calls) == 2
    # a breaker is cut to 40 characters, as llama.cpp cuts it: the text holding its first 40 is a breaker
    assert ll.scan_breakers(["y" * 40, "z"], ("y" * 41,)).whole == {0}


def test_a_split_breaker_limits_the_run_as_the_same_breaker_in_one_token_does():
    # p q [xa b c] p q s [xa b c] p q: the latest breaker ends 2 tokens before the end, so rep_limit = 2. s
    # follows the earlier "[xa b c] p q", a run of 4 (of 2 when capped); xa follows "p q", a run of 2.
    split = [P, Q, XA, BC, P, Q, S, XA, BC, P, Q]
    assert penalties(split, ["ab c"], FakeTokenizer()) == (lost(S=1.0, XA=1.0), {"run": 2, "penalised": 2})
    # without the tokenizer the split breaker is not seen: s extends a run of 4, 2 ** 2
    assert penalties(split, ["ab c"]) == (lost(S=4.0, XA=1.0), {"run": 4, "penalised": 2})
    # the breaker in one token: the same cap; that token extends a run of 2 but, a breaker by itself, is spared,
    # where the head of a split breaker (xa above) is penalised, as llama.cpp does
    whole = [P, Q, ABC, P, Q, S, ABC, P, Q]
    assert penalties(whole, ["ab c"], FakeTokenizer()) == (lost(S=1.0), {"run": 2, "penalised": 1})


def test_a_head_whose_tail_does_not_follow_does_not_limit():
    # xa is followed by r, not by "b c": no breaker, and s follows an earlier "xa r p q", a run of 4
    context = [P, Q, XA, R, P, Q, S, XA, R, P, Q]
    assert penalties(context, ["ab c"], FakeTokenizer())[0] == lost(S=4.0, XA=1.0)
    # a head at the very end, its tail still to come, does not limit either
    ending = [P, Q, R, S, P, Q, R, XA]
    stage = ll.Dry(1.0, 2.0, 2, -1, ["ab c"])
    prepare([stage], token_texts=list(TEXTS), tokenize=FakeTokenizer())
    assert stage.rep_limit(ending[::-1]) == len(ending)
    assert stage.rep_limit([BC, XA, P]) == 0 and stage.rep_limit([P, C, XAB, P]) == 1


def test_the_longest_tail_that_matches_wins():
    # with "ab cd" too, xa heads two tails: "b c" and "b c" "d". q r s [xa b c d] q r s [xa b c d] q r: the
    # longest match ends 2 tokens before the end (rep_limit 2, s's run 2 costs 1); "ab c" alone ends 3 before
    # (rep_limit 3, s's run 3 costs 2)
    context = [Q, R, S, XA, BC, D, Q, R, S, XA, BC, D, Q, R]
    tokenize = FakeTokenizer()
    assert ll.scan_breakers(TEXTS, ("ab c", "ab cd"), tokenize).tails[XA] == ((BC, D), (BC,))
    assert penalties(context, ["ab c", "ab cd"], tokenize)[0] == lost(S=1.0)
    assert penalties(context, ["ab c"], tokenize)[0] == lost(S=2.0)


@pytest.mark.parametrize("breakers", [["ab c"], ["\n", ":", "\"", "*"]])
def test_the_scan_runs_once_per_vocabulary_and_breakers(breakers):
    texts = list(TEXTS)
    tokenize = FakeTokenizer()
    first = ll.breaker_tokens(texts, tuple(breakers), tokenize)
    calls = len(tokenize.calls)
    assert ll.breaker_tokens(texts, tuple(breakers), tokenize) is first and len(tokenize.calls) == calls


def test_a_decode_hands_dry_the_models_tokenizer(llama):
    # a tiny byte-level vocabulary: "the" splits after any token ending with "t" or "th"; each head's text
    # followed by its tail's texts spells the breaker
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", dry_multiplier=0.8,
                          dry_sequence_breakers='["the"]')
    dry = next(p for p in Decoder(llama, "the cat", config).processors if isinstance(p, ll.Dry))
    texts = llama.token_texts
    assert dry.breaker_tails
    for head, tails in dry.breaker_tails.items():
        for tail in tails:
            assert "the" in texts[head] + "".join(texts[i] for i in tail) and "the" not in texts[head]
