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


LOGPROB_ROWS = 16        # rows whose float64 log-probabilities are worked out at a time ([16, V], 34 MB on Gemma)


def draw_samples(lm: LoadedModel, prompt_ids: list, settings: TreeSettings, n: int, seed: int = 0,
                 prompt: PromptCache | None = None, should_stop=None, progress=None) -> SampleSummary | None:
    """n samples from the tree's distribution, drawn together one token a step with a seeded generator.
    prompt: the prompt's pass already run (shared, never copied per sample). should_stop(): polled between
    steps (a stop gives None: part of the samples would not be the n asked for); progress(done, depth): after
    each step."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SAMPLES:
        raise ConfigError("samples", f"samples: must be a whole number from 1 to {MAX_SAMPLES}, got {n!r}")
    settings.check()
    generator = torch.Generator().manual_seed(int(seed))
    ends = end_ids(lm)
    end_index = torch.tensor(ends)
    prompt = prompt if prompt is not None else PromptCache(lm, prompt_ids)
    step = prompt.step_rows(n, settings.depth)
    tokens = [[] for _ in range(n)]
    logprob = [0.0] * n
    done = [False] * n
    logits = prompt.logits.expand(n, -1)
    for depth in range(settings.depth + 1):
        if should_stop is not None and depth and should_stop():
            return None
        if depth == settings.depth:      # only the end is looked at past the depth
            end_lp = _end_logprobs(settings, prompt_ids, tokens, logits, end_index)
            for i in range(n):
                if not done[i]:
                    draw = torch.rand((), generator=generator).item()
                    p_end = math.exp(end_lp[i])
                    if draw < p_end:
                        logprob[i] += end_lp[i]
                        done[i] = True
                    else:                # cut at the depth: the mass of its continuations that do not end here
                        logprob[i] += math.log1p(-p_end) if p_end < 1 else -math.inf
            break
        drawn, drawn_lp, end_lp = _draw(settings, prompt_ids, tokens, logits, end_index, generator)
        feed = []
        for i, token in enumerate(drawn):
            if not done[i]:
                if token in ends:
                    logprob[i] += end_lp[i]
                    done[i] = True
                else:
                    tokens[i].append(token)
                    logprob[i] += drawn_lp[i]
            feed.append(ends[0] if done[i] else tokens[i][-1])
        if all(done):
            break
        logits = step(feed)
        if progress is not None:
            progress(depth + 1, settings.depth)
    return summarise(lm, tokens, done, logprob, n, seed)


def _draw(settings, prompt_ids, tokens, logits, end_index, generator) -> tuple:
    """One token drawn per row, its log-probability and each row's end log-probability, the float64 work
    done LOGPROB_ROWS rows at a time (one generator drawing the rows in order draws what it draws for all rows
    at once: torch.multinomial takes its numbers row by row)."""
    drawn, drawn_lp, end_lp = [], [], []
    for start in range(0, len(tokens), LOGPROB_ROWS):
        rows = range(start, min(start + LOGPROB_ROWS, len(tokens)))
        lp = next_logprobs(settings.distribution, [list(prompt_ids) + tokens[i] for i in rows],
                           logits[rows.start:rows.stop])
        end_lp += torch.logsumexp(lp[:, end_index], dim=1).tolist()
        chosen = torch.multinomial(lp.exp().float(), 1, generator=generator)
        drawn += chosen.squeeze(1).tolist()
        drawn_lp += lp.gather(1, chosen).squeeze(1).tolist()
    return drawn, drawn_lp, end_lp


def _end_logprobs(settings, prompt_ids, tokens, logits, end_index) -> list:
    """Each row's log-probability of ending here, LOGPROB_ROWS rows at a time."""
    out = []
    for start in range(0, len(tokens), LOGPROB_ROWS):
        rows = range(start, min(start + LOGPROB_ROWS, len(tokens)))
        lp = next_logprobs(settings.distribution, [list(prompt_ids) + tokens[i] for i in rows],
                           logits[rows.start:rows.stop])
        out += torch.logsumexp(lp[:, end_index], dim=1).tolist()
    return out


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
