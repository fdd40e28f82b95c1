"""DRY's breaker scan against a brute force over every token and every beginning of every breaker (split_rests,
the definition), and the work it does: the vocabulary's texts are read once however many breakers a link
gives, and a list of breakers that would split over too many token pairs is refused in one line."""
from __future__ import annotations

import random

import pytest

from engine.samplers import llama as ll
from engine.errors import ConfigError

pytestmark = pytest.mark.tiny


def brute(texts, breakers, tokenize) -> ll.BreakerTokens:
    """Every token against every breaker, by the definition."""
    breakers = [b[:ll.BREAKER_CHARS] for b in breakers if b]
    whole = {i for i, text in enumerate(texts) if any(b in text for b in breakers)}
    tails: dict = {}
    for breaker in (b for b in breakers if len(b) > 1):
        for i, text in enumerate(texts):
            for rest in ll.split_rests(text, breaker):
                ids = tuple(tokenize(rest))[:ll.BREAKER_TAIL]
                if ids:
                    tails.setdefault(i, set()).add(ids)
                else:
                    whole.add(i)
    return ll.BreakerTokens(frozenset(whole), {h: tuple(sorted(t, key=len, reverse=True)) for h, t in tails.items()})


def char_tokenize(text: str) -> list:
    """A tokenizer of one token per character (ids 1000 + code point); '~' gives no token."""
    return [1000 + ord(c) for c in text if c != "~"]


@pytest.mark.parametrize("seed", range(40))
def test_the_scan_finds_what_every_token_against_every_breaker_finds(seed):
    rng = random.Random(seed)
    alphabet = "ab~é\n :" + "\x01"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 60))]
    breakers = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 6))]
    got = ll.scan_breakers(list(texts), tuple(breakers), char_tokenize)
    want = brute(texts, breakers, char_tokenize)
    assert got.whole == want.whole
    assert {h: set(t) for h, t in got.tails.items()} == {h: set(t) for h, t in want.tails.items()}
    assert all([len(x) for x in t] == sorted((len(x) for x in t), reverse=True) for t in got.tails.values())


class CountedTexts(list):
    """A vocabulary that counts how many texts are read out of it."""
    reads = 0

    def __iter__(self):
        for text in list.__iter__(self):
            self.reads += 1
            yield text

    def __getitem__(self, index):
        self.reads += 1
        return list.__getitem__(self, index)


def test_the_vocabulary_is_read_once_whatever_the_breakers():
    """64 breakers of 40 characters over 30,000 texts (a link at the limits): the texts are read once (they were
    read once per breaker), and the pairs found are the brute force's."""
    rng = random.Random(1)
    texts = CountedTexts("".join(rng.choice("bcdfgh ") for _ in range(rng.randint(1, 8))) for _ in range(30_000))
    texts += ["xe", "xea", "aae", "q"]
    breakers = tuple(("e" + "a" * 39) if k == 0 else ("a" * k + "e" + "a" * (39 - k)) for k in range(64))
    texts.reads = 0
    found = ll.scan_breakers(texts, breakers, char_tokenize)
    assert texts.reads <= len(texts)
    want = brute(list(texts), breakers, char_tokenize)
    assert found.whole == want.whole and set(found.tails) == set(want.tails) == {30_000, 30_001, 30_002}


def test_breakers_splitting_over_too_many_pairs_are_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(ll, "MAX_SPLIT_PAIRS", 5)
    texts = [f"{c}a" for c in "bcdefghij"]
    with pytest.raises(ConfigError) as raised:
        ll.scan_breakers(texts, ("ab",), char_tokenize)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("dry_sequence_breakers: ") and "5" in message
