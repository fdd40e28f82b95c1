"""Where each strategy's answer lands among the answers: greedy, beam search of each width, samples.

Greedy and beam search run as the app runs them (engine.strategies.decode, proven against `generate`),
with `max_new_tokens` = the tree's depth + 1 so an answer of `depth` tokens can still end. Each answer is
then scored exactly under the tree's distribution (`answer_logprob`: one forward pass over prompt + answer),
and ranked among the answers the tree found; the rank is the model's true rank when the answer is at least
the tree's bound (no answer not found can beat it).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import MAX_BEAMS, DecodeConfig
from ..errors import ConfigError
from .distribution import Distribution, next_logprobs
from .tree import AnswerTree, _text, end_ids
from ..model import LoadedModel


@dataclass(frozen=True)
class Landing:
    strategy: str             # "greedy", "beam 4", "sample"
    token_ids: tuple          # the answer's tokens, the end not included
    text: str
    complete: bool            # False: it did not end within the tree's depth
    logprob: float            # exact, under the tree's distribution (the end included when complete)
    rank: int                 # among the tree's answers (0 when it is not complete)
    found: bool               # the tree holds this very answer
    exact_rank: bool          # the rank is the model's own (the answer is at least the tree's bound)


def answer_logprob(lm: LoadedModel, prompt_ids: list, token_ids: list, dist: Distribution, complete: bool) -> float:
    """log P(answer) under `dist`: the sum of each token's log-probability given what comes before, plus
    log p(end) summed over the end ids when the answer is complete. One forward pass over prompt + answer."""
    ids = list(prompt_ids) + list(token_ids)
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([ids], device=lm.device)).logits[0].to("cpu", torch.float32)
    start = len(prompt_ids) - 1
    rows = [ids[:start + 1 + i] for i in range(len(token_ids) + 1)]
    lp = next_logprobs(dist, rows, logits[start:start + len(token_ids) + 1])
    total = sum(lp[i, t].item() for i, t in enumerate(token_ids))
    if complete:
        total += torch.logsumexp(lp[len(token_ids), torch.tensor(end_ids(lm))], 0).item()
    return total


def _no_end_at_depth(lm: LoadedModel, tree: AnswerTree, token_ids: tuple) -> float:
    """log(1 - p(end | prefix)) for a prefix of `depth` tokens: the tree's cut outcome (0 for a shorter one)."""
    import math

    if len(token_ids) < tree.settings.depth:
        return 0.0
    end = answer_logprob(lm, tree.prompt_ids, token_ids, tree.settings.distribution, True) - \
        answer_logprob(lm, tree.prompt_ids, token_ids, tree.settings.distribution, False)
    return math.log1p(-math.exp(end)) if end < 0 else -math.inf


def parse_beams(text: str) -> list:
    """'1,4,8' -> [1, 4, 8]: beam widths, each 1..MAX_BEAMS, at most 6."""
    try:
        widths = [int(w) for w in str(text).split(",") if w.strip()]
    except ValueError:
        raise ConfigError("beams", f"beams: '{str(text)[:40]}' is not a list of whole numbers like 1,4,8",
                          "beams_not_numbers", text=str(text)[:40]) from None
    if not widths or len(widths) > 6 or any(not 1 <= w <= MAX_BEAMS for w in widths):
        raise ConfigError("beams", f"beams: give 1 to 6 widths, each from 1 to {MAX_BEAMS}, like 1,4,8",
                          "beams_widths", most=MAX_BEAMS)
    return sorted(set(widths))


def land(lm: LoadedModel, tree: AnswerTree, name: str, token_ids: list, complete: bool) -> Landing:
    token_ids = tuple(token_ids)
    dist = tree.settings.distribution
    logprob = answer_logprob(lm, tree.prompt_ids, token_ids, dist, complete)
    same = next((a for a in tree.answers if a.token_ids == token_ids), None) if complete else None
    found = same is not None
    if found:                 # the same answer: one number for it on the page, the tree's
        logprob = same.logprob
    if not complete:      # the outcome is the prefix of `depth` tokens that does not end there
        logprob += _no_end_at_depth(lm, tree, token_ids)
    rank = tree.rank_of(logprob) if complete else 0
    return Landing(name, token_ids, _text(lm, token_ids), complete, logprob, rank, found,
                   complete and tree.beyond_reach(logprob))


def landings(lm: LoadedModel, prompt: str, tree: AnswerTree, chat: bool, beams: list) -> list:
    """Greedy's answer and each beam width's best answer, scored and ranked against the tree."""
    from ..strategies import decode

    ends, out = set(end_ids(lm)), []
    length = tree.settings.depth + 1
    runs = [("greedy", DecodeConfig(strategy="greedy", max_new_tokens=length, chat=chat))]
    runs += [(f"beam {w}", DecodeConfig(strategy="beam", num_beams=w, max_new_tokens=length, chat=chat,
                                        length_penalty=1.0)) for w in beams if w > 1]
    for name, config in runs:
        trace = decode(lm, prompt, config)
        ids = list(trace.best.token_ids)
        complete = bool(ids) and ids[-1] in ends
        out.append(land(lm, tree, name, ids[:-1] if complete else ids[:tree.settings.depth], complete))
    return out
