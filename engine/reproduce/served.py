"""The same temperature-0 request sent N times to a server, at several concurrencies: how many distinct
completions came back, where they part, and how close the server's own top two log-probabilities were there.

A server batches the requests in flight together (vLLM, SGLang; llama.cpp's --parallel slots), so the batch each
request lands in depends on the load, and so may its logits (see the package docstring). Only what the server
says is used: its texts, its tokens and its top-2 log-probabilities (llama.cpp's n_probs, vLLM's logprobs). A
server that gave one completion every time is a result too, and is said as such.
"""
from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..served import Server, TopN
from ..served.client import answers_checked

MAX_REQUESTS = 64              # a level sends at most this many requests: a shared server is someone's server
MAX_CONCURRENCY = 16
MAX_LEVELS = 5
MAX_TOKENS = 128


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: tuple                 # the token texts, as the server reports them
    tops: tuple                   # [TopN] one per token: the server's top log-probabilities there

    def margin(self, position: int) -> float | None:
        """Top-1 minus top-2 log-probability at `position`, from the server's own top-N; None without two."""
        if not 0 <= position < len(self.tops) or len(self.tops[position].top) < 2:
            return None
        (_, first), (_, second) = self.tops[position].top[:2]
        return first - second


@dataclass(frozen=True)
class Distinct:
    """One distinct completion: how often it came back, and where it leaves the most common one."""
    completion: Completion
    count: int
    parts_at: int | None          # first token index where it differs from the most common (None: it is that one)
    margin: float | None          # the most common completion's top-2 log-probability margin at that index


@dataclass
class Level:
    concurrency: int
    completions: list = field(default_factory=list)     # [Completion] in the order they were sent
    seconds: float = 0.0

    @property
    def distinct(self) -> list:
        return distinct_completions(self.completions)


def first_difference(a: tuple, b: tuple) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def distinct_completions(completions: list) -> list:
    """[Distinct] most common first (ties by first arrival); each with where it parts from the most common."""
    if not completions:
        return []
    counts = Counter(c.tokens for c in completions)
    first_seen = {}
    for c in completions:
        first_seen.setdefault(c.tokens, c)
    order = sorted(counts, key=lambda tokens: -counts[tokens])
    top = first_seen[order[0]]
    out = []
    for tokens in order:
        at = first_difference(top.tokens, tokens)
        out.append(Distinct(first_seen[tokens], counts[tokens], at, top.margin(at) if at is not None else None))
    return out


def first_divergence(completions: list) -> int | None:
    """The first token index at which the completions do not all agree; None when they are all the same."""
    found = [d.parts_at for d in distinct_completions(completions) if d.parts_at is not None]
    return min(found) if found else None


def check_plan(requests: int, levels: tuple, max_tokens: int) -> None:
    if isinstance(requests, bool) or not isinstance(requests, int) or not 1 <= requests <= MAX_REQUESTS:
        raise ConfigError("requests", f"requests: must be between 1 and {MAX_REQUESTS}, got {requests!r}")
    if not levels or len(levels) > MAX_LEVELS:
        raise ConfigError("concurrency", f"concurrency: give 1 to {MAX_LEVELS} levels, got {len(levels)}")
    for level in levels:
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= MAX_CONCURRENCY:
            raise ConfigError("concurrency", f"concurrency: each level must be between 1 and {MAX_CONCURRENCY}, "
                                             f"got {level!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_TOKENS:
        raise ConfigError("max_tokens", f"max tokens: must be between 1 and {MAX_TOKENS}, got {max_tokens!r}")


def one_completion(server: Server, prompt: str, max_tokens: int) -> Completion:
    """One greedy request with the top two log-probabilities at every token."""
    with answers_checked(server):
        text, tops, _ = server.complete(prompt, max_tokens=max_tokens, logprobs=2, temperature=0.0, seed=0)
    return Completion(text, tuple(t.text for t in tops), tuple(tops))


def send_identical(server: Server, prompt: str, requests: int, levels: tuple, max_tokens: int,
                   progress=None) -> list:
    """[Level] for each concurrency: `requests` identical temperature-0 requests, at most that many in flight.
    progress(done, total) after each answer. A request that fails ends the study with its one line."""
    check_plan(requests, tuple(levels), max_tokens)
    total, done, out = requests * len(levels), 0, []
    for concurrency in levels:
        level = Level(concurrency)
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = [pool.submit(one_completion, server, prompt, max_tokens) for _ in range(requests)]
            for future in futures:
                level.completions.append(future.result())
                done += 1
                if progress is not None:
                    progress(done, total)
        level.seconds = time.perf_counter() - start
        out.append(level)
    return out


__all__ = ["Completion", "Distinct", "Level", "TopN", "distinct_completions", "first_divergence", "send_identical"]
