"""N seeded samples from the tree's distribution, each rescored exactly, against the tree.

The outcome space is the tree's: a complete answer of at most `depth` tokens, or a prefix of `depth` tokens
that has not ended (its probability is the mass of every continuation that starts with it). The
probabilities of all outcomes add up to 1, so the mass never sampled is known exactly: 1 minus the sum over
the distinct outcomes seen. Good–Turing estimates the same number from the counts alone: the share of
samples whose outcome was seen exactly once, n1 / N.
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

import torch

from ..config import MAX_ANSWER_SAMPLES as MAX_SAMPLES, seed_problem
from ..errors import ConfigError
from ..model import LoadedModel
from .distribution import next_logprobs
from .passes import PromptCache
from .stops import Endings, answer_text
from .tree import TreeSettings, _text, end_ids


@dataclass(frozen=True)
class Outcome:
    token_ids: tuple          # the answer's tokens, the end (or the token that stopped it) not included
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
    each step. The float64 work runs LOGPROB_ROWS rows at a time; one generator drawing the rows in order draws
    what it draws for all rows at once (torch.multinomial takes its numbers row by row)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SAMPLES:
        raise ConfigError("samples", f"samples: must be a whole number from 1 to {MAX_SAMPLES}, got {n!r}",
                          "whole_number", name="samples", most=MAX_SAMPLES, got=repr(n)[:40])
    if seed_problem(seed):
        raise ConfigError("seed", f"seed: {seed_problem(seed)}")
    settings.check()
    generator = torch.Generator().manual_seed(seed)
    ends = end_ids(lm)
    end_index = torch.tensor(ends)
    endings = Endings(lm, ends, settings.stops)
    prompt = prompt if prompt is not None else PromptCache(lm, prompt_ids)
    step = prompt.step_rows(n, settings.depth)
    tokens = [[] for _ in range(n)]
    texts = [b""] * n
    logprob = [0.0] * n
    done = [False] * n
    said: list = [None] * n          # a stopped sample's text (None: the prefix's own)
    logits = prompt.logits.expand(n, -1)
    for depth in range(settings.depth + 1):
        if should_stop is not None and depth and should_stop():
            return None
        last = depth == settings.depth
        if last and not endings.stopping:      # only the end is looked at past the depth
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
        feed = []
        for start in range(0, n, LOGPROB_ROWS):
            rows = range(start, min(start + LOGPROB_ROWS, n))
            lp = next_logprobs(settings.distribution, [list(prompt_ids) + tokens[i] for i in rows],
                               logits[rows.start:rows.stop])
            drawn = torch.multinomial(lp.exp().float(), 1, generator=generator).squeeze(1).tolist()
            for r, (i, token) in enumerate(zip(rows, drawn)):
                if not done[i]:
                    ending = endings.after(texts[i], lp[r]) if endings.stopping or token in ends else None
                    if ending is not None and bool(ending.mask[token]):
                        group = ending.group_of(token)
                        logprob[i] += math.log(ending.probs[group].item())
                        said[i] = ending.keys[group]
                        done[i] = True
                    elif last:           # cut at the depth: its continuations that do not end here
                        rest = 1.0 - ending.total
                        logprob[i] += math.log(rest) if rest > 0 else -math.inf
                    else:
                        tokens[i].append(token)
                        texts[i] = endings.extend(texts[i], token)
                        logprob[i] += lp[r, token].item()
                feed.append(ends[0] if done[i] or not tokens[i] else tokens[i][-1])
        if all(done) or last:
            break
        logits = step(feed)
        if progress is not None:
            progress(depth + 1, settings.depth)
    return summarise(lm, tokens, done, logprob, n, seed, said)


def _end_logprobs(settings, prompt_ids, tokens, logits, end_index) -> list:
    """Each row's log-probability of ending here, LOGPROB_ROWS rows at a time."""
    out = []
    for start in range(0, len(tokens), LOGPROB_ROWS):
        rows = range(start, min(start + LOGPROB_ROWS, len(tokens)))
        lp = next_logprobs(settings.distribution, [list(prompt_ids) + tokens[i] for i in rows],
                           logits[rows.start:rows.stop])
        out += torch.logsumexp(lp[:, end_index], dim=1).tolist()
    return out


def summarise(lm: LoadedModel, tokens, complete, logprob, n, seed, said=None) -> SampleSummary:
    """Distinct outcomes with their counts; Good–Turing's estimate beside the exact unsampled mass. An outcome is
    its tokens, whether it ended, and (stopped at a stop string) its text."""
    said = said or [None] * n
    texts = [answer_text(key, functools.partial(_text, lm, tuple(t))) for t, key in zip(tokens, said)]
    counts = Counter((tuple(t), c, x) for t, c, x in zip(tokens, complete, texts))
    exact = {}
    for t, c, x, lp in zip(tokens, complete, texts, logprob):
        exact[(tuple(t), c, x)] = lp
    outcomes = [Outcome(ids, x, c, exact[(ids, c, x)], k) for (ids, c, x), k in counts.items()]
    return summarise_outcomes(outcomes, n, seed)


def summarise_outcomes(outcomes: list, n: int, seed: int) -> SampleSummary:
    """The summary of distinct outcomes with their counts (also what a file's samples are read into)."""
    outcomes = sorted(outcomes, key=lambda o: (-o.count, -o.logprob))
    seen_once = sum(1 for o in outcomes if o.count == 1)
    unsampled = max(0.0, 1.0 - sum(math.exp(o.logprob) for o in outcomes))
    return SampleSummary(samples=n, seed=int(seed), outcomes=tuple(outcomes), good_turing=seen_once / max(n, 1),
                         unsampled=unsampled)
