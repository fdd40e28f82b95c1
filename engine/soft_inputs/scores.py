"""After a run: each lane's emitted text scored as text, and its cost per step.

  - perplexity: one teacher-forced forward pass over the prompt and the emitted ids (ids only, whatever the lane
    fed), exp of the mean negative log-probability of those ids under the same model. Low favours greedy, so it
    is read with the repetition figures;
  - repetition: distinct-2 (distinct bigrams / bigrams) and the longest n-gram that occurs twice;
  - cost: the multiply-adds of forming the input, from the model's shapes (rules.multiply_adds), beside the
    measured median time of the rule alone and of the whole step.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import torch

from ..model import LoadedModel
from ..trace import Trace
from .rules import multiply_adds


@dataclass(frozen=True)
class LaneScore:
    strategy: str
    tokens: int
    perplexity: float             # nan for an empty lane
    logprobs: list                # per emitted id, under teacher forcing
    distinct2: float              # nan with fewer than 2 tokens
    repeat_length: int            # the longest n-gram that occurs twice (0: none)
    repeat_text: str
    multiply_adds: int            # per step, forming the input (0: a lookup or a state already computed)
    rule_seconds: float           # median, forming the input alone (nan where the lane does not record it)
    step_seconds: float           # median, the whole step (forward pass, choice, records)


def emitted_ids(trace: Trace) -> list:
    return [s.emitted_id if s.emitted_id is not None else s.chosen_ids[0] for s in trace.steps]


@torch.inference_mode()
def teacher_forced_logprobs(lm: LoadedModel, prompt_ids: list, ids: list) -> list:
    """log p(ids[i] | prompt, ids[:i]) from one forward pass over prompt + ids."""
    if not ids:
        return []
    tokens = torch.tensor([list(prompt_ids) + list(ids)], device=lm.device)
    logits = lm.model(input_ids=tokens).logits[0, len(prompt_ids) - 1:-1].to("cpu", torch.float32)
    logprobs = torch.log_softmax(logits, dim=-1)
    return [float(logprobs[i, token]) for i, token in enumerate(ids)]


def distinct_n(ids: list, n: int = 2) -> float:
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else math.nan


def longest_repeat(ids: list) -> tuple[int, tuple]:
    """(n, the n-gram) of the longest n-gram occurring at least twice (occurrences may overlap); (0, ())."""
    best: tuple = ()
    n = 1
    while n < len(ids):
        seen, found = set(), None
        for i in range(len(ids) - n + 1):
            gram = tuple(ids[i:i + n])
            if gram in seen:
                found = gram
                break
            seen.add(gram)
        if found is None:          # no repeated n-gram means no repeated longer one either
            break
        best, n = found, n + 1
    return len(best), best


def _median(values: list) -> float:
    return statistics.median(values) if values else math.nan


def score(lm: LoadedModel, trace: Trace) -> LaneScore:
    ids = emitted_ids(trace)
    logprobs = teacher_forced_logprobs(lm, trace.prompt_token_ids, ids)
    perplexity = math.exp(-sum(logprobs) / len(logprobs)) if logprobs else math.nan
    length, gram = longest_repeat(ids)
    config = trace.config
    return LaneScore(strategy=config.strategy, tokens=len(ids), perplexity=perplexity, logprobs=logprobs,
                     distinct2=distinct_n(ids, 2), repeat_length=length,
                     repeat_text=lm.tokenizer.decode(list(gram)) if gram else "",
                     multiply_adds=multiply_adds(config.strategy, lm.facts.vocab_size, lm.facts.hidden_size,
                                                 config.soft_top_k, config.mtm_k),
                     rule_seconds=_median([s.fed.rule_seconds for s in trace.steps if s.fed is not None]),
                     step_seconds=_median([s.seconds for s in trace.steps[1:]]))
