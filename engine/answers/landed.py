"""Where each strategy's answer lands among the answers: greedy, beam search of each width, samples.

Greedy and beam search run as the app runs them (engine.strategies, proven against `generate`), with
`max_new_tokens` = the tree's depth + 1 so an answer of `depth` tokens can still end; each starts from the
prompt's pass the tree ran (Runner.start_from), so the prompt is read once for all of them. Each answer is then
scored exactly under the tree's distribution (`answer_logprob`: one forward pass over the answer on the prompt's
cache) and ranked among the answers the tree found; the rank is the model's true rank when the answer is at
least the tree's bound (no answer not found can beat it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..config import MAX_BEAMS, DecodeConfig
from ..errors import ConfigError
from ..runner import forward_kwargs
from .distribution import Distribution, next_logprobs
from .passes import PromptCache
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


def answer_logprob(lm: LoadedModel, prompt_ids: list, token_ids: list, dist: Distribution, complete: bool,
                   prompt: PromptCache | None = None) -> float:
    """log P(answer) under `dist`: the sum of each token's log-probability given what comes before, plus
    log p(end) summed over the end ids when the answer is complete. One forward pass over prompt + answer, or
    over the answer alone on the prompt's cache when `prompt` is given."""
    tokens, end = _answer_parts(lm, prompt_ids, token_ids, dist, prompt)
    return tokens + end if complete else tokens


def _answer_parts(lm: LoadedModel, prompt_ids: list, token_ids, dist: Distribution, prompt) -> tuple:
    """(the sum of the answer's tokens' log-probabilities, log p(end) after them)."""
    ids = list(prompt_ids) + list(token_ids)
    start = len(prompt_ids) - 1
    if prompt is not None:
        logits = prompt.logits_along(list(token_ids))
    else:
        keep = {"logits_to_keep": len(token_ids) + 1} if forward_kwargs(lm.model) else {}   # not [P, V] whole
        with torch.inference_mode():
            logits = lm.model(input_ids=torch.tensor([ids], device=lm.device), **keep).logits[0]
        logits = logits[-(len(token_ids) + 1):].to("cpu", torch.float32)
    rows = [ids[:start + 1 + i] for i in range(len(token_ids) + 1)]
    lp = next_logprobs(dist, rows, logits)
    total = sum(lp[i, t].item() for i, t in enumerate(token_ids))
    return total, torch.logsumexp(lp[len(token_ids), torch.tensor(end_ids(lm))], 0).item()


def parse_beams(text: str) -> list:
    """'1,4,8' -> [1, 4, 8]: beam widths, each 1..MAX_BEAMS, at most 6."""
    try:
        widths = [int(w) for w in str(text).split(",") if w.strip()]
    except ValueError:
        raise ConfigError("beams", f"beams: '{str(text)[:40]}' is not a list of whole numbers like 1,4,8") from None
    if not widths or len(widths) > 6 or any(not 1 <= w <= MAX_BEAMS for w in widths):
        raise ConfigError("beams", f"beams: give 1 to 6 widths, each from 1 to {MAX_BEAMS}, like 1,4,8")
    return sorted(set(widths))


def land(lm: LoadedModel, tree: AnswerTree, name: str, token_ids: list, complete: bool,
         prompt: PromptCache | None = None) -> Landing:
    token_ids = tuple(token_ids)
    dist = tree.settings.distribution
    tokens, end = _answer_parts(lm, tree.prompt_ids, token_ids, dist, prompt)
    logprob = tokens + end if complete else tokens
    same = next((a for a in tree.answers if a.token_ids == token_ids), None) if complete else None
    found = same is not None
    if found:                 # the same answer: one number for it on the page, the tree's
        logprob = same.logprob
    if not complete and len(token_ids) >= tree.settings.depth:
        # the outcome is the prefix of `depth` tokens that does not end there: log(1 - p(end | prefix))
        logprob += math.log1p(-math.exp(end)) if end < 0 else -math.inf
    rank = tree.rank_of(logprob) if complete else 0
    return Landing(name, token_ids, _text(lm, token_ids), complete, logprob, rank, found,
                   complete and tree.beyond_reach(logprob))


def landings(lm: LoadedModel, prompt: str, tree: AnswerTree, chat: bool, beams: list,
             cache: PromptCache | None = None, should_stop=None, progress=None) -> list:
    """Greedy's answer and each beam width's best answer, scored and ranked against the tree. cache: the
    prompt's pass already run: each decode starts from it and each answer is scored on it, so the prompt is
    read once, not twice per strategy. should_stop(): polled between steps (a stop keeps the landings so far);
    progress(done, of, name): before each strategy."""
    from ..strategies import make_runner

    ends, out = set(end_ids(lm)), []
    length = tree.settings.depth + 1
    runs = [("greedy", DecodeConfig(strategy="greedy", max_new_tokens=length, chat=chat))]
    runs += [(f"beam {w}", DecodeConfig(strategy="beam", num_beams=w, max_new_tokens=length, chat=chat,
                                        length_penalty=1.0)) for w in beams if w > 1]
    for done, (name, config) in enumerate(runs):
        if progress is not None:
            progress(done, len(runs), name)
        runner = make_runner(lm, prompt, config)
        if cache is not None and list(runner.prompt_ids) == list(cache.prompt_ids):
            runner.start_from(cache)
        while not runner.finished:
            if should_stop is not None and should_stop():
                return out
            runner.step()
        ids = list(runner.trace().best.token_ids)
        complete = bool(ids) and ids[-1] in ends
        out.append(land(lm, tree, name, ids[:-1] if complete else ids[:tree.settings.depth], complete, cache))
    return out
