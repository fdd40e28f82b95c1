"""N seeded samples from the tree's distribution, each rescored exactly, against the tree.

The outcome space is the tree's: a complete answer of at most `depth` tokens, or a prefix of `depth` tokens
that has not ended (its probability is the mass of every continuation that starts with it). The
probabilities of all outcomes add up to 1, so the mass never sampled is known exactly: 1 minus the sum over
the distinct outcomes seen. Good–Turing estimates the same number from the counts alone: the share of
samples whose outcome was seen exactly once, n1 / N.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from ..config import MAX_ANSWER_SAMPLES as MAX_SAMPLES
from ..errors import ConfigError
from ..model import LoadedModel
from .distribution import next_logprobs
from .passes import PromptCache
from .tree import TreeSettings, _text, end_ids


@dataclass(frozen=True)
class Outcome:
    token_ids: tuple          # the answer's tokens, the end not included
    text: str
    complete: bool            # False: cut at the depth without an end
    logprob: float            # exact: the answer's probability (end included), or the prefix's mass
    count: int                # how many samples landed here


@dataclass(frozen=True)
class SampleSummary:
    samples: int
    seed: int
    outcomes: tuple           # Outcome, most often sampled first (then most probable)
    good_turing: float        # n1 / N: the estimated mass of outcomes never sampled
    unsampled: float          # exact: 1 - the sum of the distinct outcomes' probabilities

    @property
    def seen_once(self) -> int:
        return sum(1 for o in self.outcomes if o.count == 1)


def draw_samples(lm: LoadedModel, prompt_ids: list, settings: TreeSettings, n: int, seed: int = 0) -> SampleSummary:
    """n samples from the tree's distribution, drawn together one token a step with a seeded generator."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SAMPLES:
        raise ConfigError("samples", f"samples: must be a whole number from 1 to {MAX_SAMPLES}, got {n!r}",
                          "whole_number", name="samples", most=MAX_SAMPLES, got=repr(n)[:40])
    settings.check()
    generator = torch.Generator().manual_seed(int(seed))
    ends = end_ids(lm)
    end_index = torch.tensor(ends)
    prompt = PromptCache(lm, prompt_ids)
    step = prompt.step_rows(n)
    tokens = [[] for _ in range(n)]
    logprob = [0.0] * n
    done = [False] * n
    logits = prompt.logits.expand(n, -1)
    for depth in range(settings.depth + 1):
        lp = next_logprobs(settings.distribution, [list(prompt_ids) + t for t in tokens], logits)
        end_lp = torch.logsumexp(lp[:, end_index], dim=1)
        if depth == settings.depth:      # only the end is looked at past the depth
            for i in range(n):
                if not done[i]:
                    draw = torch.rand((), generator=generator).item()
                    p_end = math.exp(end_lp[i].item())
                    if draw < p_end:
                        logprob[i] += end_lp[i].item()
                        done[i] = True
                    else:                # cut at the depth: the mass of its continuations that do not end here
                        logprob[i] += math.log1p(-p_end) if p_end < 1 else -math.inf
            break
        drawn = torch.multinomial(lp.exp().float(), 1, generator=generator).squeeze(1).tolist()
        feed = []
        for i, token in enumerate(drawn):
            if not done[i]:
                if token in ends:
                    logprob[i] += end_lp[i].item()
                    done[i] = True
                else:
                    tokens[i].append(token)
                    logprob[i] += lp[i, token].item()
            feed.append(ends[0] if done[i] else tokens[i][-1])
        if all(done):
            break
        logits = step(feed)
    return summarise(lm, tokens, done, logprob, n, seed)


def summarise(lm: LoadedModel, tokens, complete, logprob, n, seed) -> SampleSummary:
    """Distinct outcomes with their counts; Good–Turing's estimate beside the exact unsampled mass."""
    counts = Counter((tuple(t), c) for t, c in zip(tokens, complete))
    exact = {}
    for t, c, lp in zip(tokens, complete, logprob):
        exact[(tuple(t), c)] = lp
    outcomes = [Outcome(ids, _text(lm, ids), c, exact[(ids, c)], k) for (ids, c), k in counts.items()]
    return summarise_outcomes(outcomes, n, seed)


def summarise_outcomes(outcomes: list, n: int, seed: int) -> SampleSummary:
    """The summary of distinct outcomes with their counts (also what a file's samples are read into)."""
    outcomes = sorted(outcomes, key=lambda o: (-o.count, -o.logprob))
    seen_once = sum(1 for o in outcomes if o.count == 1)
    unsampled = max(0.0, 1.0 - sum(math.exp(o.logprob) for o in outcomes))
    return SampleSummary(samples=n, seed=int(seed), outcomes=tuple(outcomes), good_turing=seen_once / max(n, 1),
                         unsampled=unsampled)
