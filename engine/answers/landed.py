"""Where each strategy's answer lands among the answers: greedy, beam search of each width, samples.

Greedy and beam search run as the app runs them (engine.strategies, proven against `generate`), with
`max_new_tokens` = the tree's depth + 1 so an answer of `depth` tokens can still end; each starts from the
prompt's pass the tree ran (Runner.start_from), so the prompt is read once for all of them. With stop strings,
greedy's answer ends at the first token that completes one and beam search runs with them (stop_beam.py). Each
answer is then scored exactly under the tree's distribution (`outcome_score`: one forward pass over the answer
on the prompt's cache) and ranked among the answers the tree found; the rank is the model's true rank when the
answer is at least the tree's bound (no answer not found can beat it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..config import MAX_BEAMS, DecodeConfig
from ..errors import ConfigError
from engine.decoding.runner import forward_kwargs
from .distribution import Distribution, next_logprobs
from .passes import PromptCache
from .stops import Endings, answer_text
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

    @property
    def key(self) -> tuple:
        return self.token_ids, self.text


def answer_logprob(lm: LoadedModel, prompt_ids: list, token_ids: list, dist: Distribution, complete: bool,
                   prompt: PromptCache | None = None) -> float:
    """log P(answer) under `dist`: the sum of each token's log-probability given what comes before, plus
    log p(end) summed over the end ids when the answer is complete. One forward pass over prompt + answer, or
    over the answer alone on the prompt's cache when `prompt` is given."""
    ends = end_ids(lm)
    return outcome_score(lm, prompt_ids, token_ids, dist, Endings(lm, ends), ends[0] if complete else None,
                         cut=False, prompt=prompt)[0]


def outcome_score(lm: LoadedModel, prompt_ids: list, token_ids, dist: Distribution, endings: Endings, ended_by,
                  cut: bool, prompt: PromptCache | None = None) -> tuple:
    """(log-probability, text) of one outcome, from one forward pass over the tokens on the prompt's cache (or
    over prompt + tokens): the tokens' sum, plus, when `ended_by` (the end token, or the token that completed a
    stop string) ends it, its answer's share of the last distribution (every next token that leaves the same
    text, stops.py); when `cut`, the share of the continuations that do not end there (a prefix cut at the
    depth)."""
    token_ids = list(token_ids)
    ids = list(prompt_ids) + token_ids
    if prompt is not None:
        logits = prompt.logits_along(token_ids)
    else:
        keep = {"logits_to_keep": len(token_ids) + 1} if forward_kwargs(lm.model) else {}   # not [P, V] whole
        with torch.inference_mode():
            logits = lm.model(input_ids=torch.tensor([ids], device=lm.device), **keep).logits[0]
        logits = logits[-(len(token_ids) + 1):].to("cpu", torch.float32)
    start = len(prompt_ids) - 1
    rows = [ids[:start + 1 + i] for i in range(len(token_ids) + 1)]
    lp = next_logprobs(dist, rows, logits)
    total = sum(lp[i, t].item() for i, t in enumerate(token_ids))
    text = b""
    for t in token_ids:
        text = endings.extend(text, t)
    if ended_by is None and not cut:
        return total, _text(lm, token_ids)
    ending = endings.after(text, lp[len(token_ids)])
    if ended_by is None:
        rest = 1.0 - ending.total
        return total + (math.log(rest) if rest > 0 else -math.inf), _text(lm, token_ids)
    group = ending.group_of(int(ended_by))
    p = ending.probs[group].item()
    return (total + (math.log(p) if p > 0 else -math.inf),
            answer_text(ending.keys[group], lambda: _text(lm, token_ids)))


def parse_beams(text: str) -> list:
    """'1,4,8' -> [1, 4, 8]: beam widths, each 1..MAX_BEAMS, each once, at most 6."""
    try:
        widths = [int(w) for w in str(text).split(",") if w.strip()]
    except ValueError:
        raise ConfigError("beams", f"beams: '{str(text)[:40]}' is not a list of whole numbers like 1,4,8",
                          "beams_not_numbers", text=str(text)[:40]) from None
    repeated = next((w for i, w in enumerate(widths) if w in widths[:i]), None)
    if repeated is not None:
        raise ConfigError("beams", f"beams: the width {repeated} is given more than once; give each width once, "
                                   "like 1,4,8")
    if not widths or len(widths) > 6 or any(not 1 <= w <= MAX_BEAMS for w in widths):
        raise ConfigError("beams", f"beams: give 1 to 6 widths, each from 1 to {MAX_BEAMS}, like 1,4,8",
                          "beams_widths", most=MAX_BEAMS)
    return sorted(widths)


def check_beam_cost(widths, depth: int) -> None:
    """Greedy and each beam search decode depth + 1 steps with one forward pass per beam: refuse a set whose
    steps x beams pass the step budget one request may take (engine.budget), naming the cost."""
    from ..budget import step_budget

    beams = sum(set(widths) | {1})
    cost, budget = (depth + 1) * beams, step_budget()
    if cost > budget:
        names = ",".join(str(w) for w in sorted(set(widths) - {1}))
        raise ConfigError("beams", f"beams: at depth {depth}, greedy and beam widths {names} decode {depth + 1} "
                                   f"steps with {beams} beams in all, {cost:,} beam steps, more than the {budget:,} "
                                   "one request may take (DECODESCOPE_COMPARE_STEPS sets it); leave out the widest, "
                                   "or lower the depth", "cost", cost=f"{cost:,}", most=f"{budget:,}")


def land(lm: LoadedModel, tree: AnswerTree, name: str, token_ids: list, ended_by,
         prompt: PromptCache | None = None) -> Landing:
    """A strategy's outcome placed among the tree's answers: `token_ids` the prefix, `ended_by` the token that
    ended it (None: it did not end within the depth)."""
    token_ids = tuple(token_ids)
    settings = tree.settings
    complete = ended_by is not None
    logprob, text = outcome_score(lm, tree.prompt_ids, token_ids, settings.distribution,
                                  Endings(lm, end_ids(lm), settings.stops), ended_by, cut=not complete,
                                  prompt=prompt)
    same = tree.answer_for(token_ids, text) if complete else None
    found = same is not None
    if found:                 # the same answer: one number for it on the page, the tree's
        logprob = same.logprob
    rank = tree.rank_of(logprob) if complete else 0
    return Landing(name, token_ids, text, complete, logprob, rank, found, complete and tree.beyond_reach(logprob))


def landings(lm: LoadedModel, prompt: str, tree: AnswerTree, chat: bool, beams: list,
             cache: PromptCache | None = None, should_stop=None, progress=None) -> list:
    """Greedy's answer and each beam width's best answer, scored and ranked against the tree. Greedy and beam
    search run as the app runs them; with stop strings, beam search runs with them (stop_beam.py) and greedy's
    answer ends at the first token that completes one. cache: the prompt's pass already run: each decode starts
    from it and each answer is scored on it, so the prompt is read once, not twice per strategy.
    should_stop(): polled between steps (a stop keeps the landings so far); progress(done, of, name): before
    each strategy."""
    from ..strategies import make_runner
    from .stop_beam import beam_tokens

    settings = tree.settings
    endings = Endings(lm, end_ids(lm), settings.stops)
    length = settings.depth + 1
    widths = [1] + [w for w in beams if w > 1]
    out = []
    for done, width in enumerate(widths):
        name = "greedy" if width == 1 else f"beam {width}"
        if progress is not None:
            progress(done, len(widths), name)
        if width > 1 and endings.stopping:
            ids = beam_tokens(lm, list(tree.prompt_ids), width, length, endings)
        else:
            config = (DecodeConfig(strategy="greedy", max_new_tokens=length, chat=chat) if width == 1 else
                      DecodeConfig(strategy="beam", num_beams=width, max_new_tokens=length, chat=chat,
                                   length_penalty=1.0))
            runner = make_runner(lm, prompt, config)
            if cache is not None and list(runner.prompt_ids) == list(cache.prompt_ids):
                runner.start_from(cache)
            while not runner.finished:
                if should_stop is not None and should_stop():
                    return out
                runner.step()
            ids = list(runner.trace().best.token_ids)
        end = endings.first_end(ids[:length])
        if end >= 0:
            out.append(land(lm, tree, name, ids[:end], ids[end], cache))
        else:
            out.append(land(lm, tree, name, ids[:settings.depth], None, cache))
    return out
