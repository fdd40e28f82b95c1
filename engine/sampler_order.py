"""The sampler chain in another engine's order: llama.cpp truncates first and divides by the temperature last.

transformers applies temperature → top-k → top-p → min-p (engine.shaping); llama.cpp's default chain applies
top-k → top-p → min-p → temperature. Top-k does not care where the temperature comes, but top-p and min-p
do: at a temperature above 1, transformers' min-p sees a flatter distribution and keeps tokens that
llama.cpp's min-p, at temperature 1, has already dropped (and the other way round below 1). So the same
settings can sample from two different sets, and "a token sampled despite min-p" in one engine is what the
other engine's order would never allow.

The chain as llama-cpp-python 0.3 really builds it (llama_cpp/llama.py, `Llama._init_sampler`, used by its
server's completions): penalties → top-k → typical-p → top-p → min-p → temperature → draw (`add_dist`), with
greedy instead when the temperature is 0; typical-p is 1 (off) unless asked for, and top-k 0 is off.
llama.cpp's own server runs the same stages in the same order by default (its `--samplers` list).

Each stage here is a logits processor written after llama.cpp's own rules (top-p keeps the most likely
tokens until their cumulative probability reaches p; min-p keeps tokens at least min_p times as likely as
the top one), so stages.py records them like transformers' own.
"""
from __future__ import annotations

import math

import torch
from transformers import LogitsProcessor, LogitsProcessorList, RepetitionPenaltyLogitsProcessor

from .config import SAMPLER_ORDERS, WARPED_STRATEGIES

ORDERS = SAMPLER_ORDERS


class _Stage(LogitsProcessor):
    """A stage of llama.cpp's chain: `stage` names it as stages.py names transformers' processors."""
    stage: tuple = ("", 0.0)


class TopK(_Stage):
    def __init__(self, k: int):
        self.k, self.stage = k, ("top_k", float(k))

    def __call__(self, input_ids, scores):
        if self.k <= 0 or self.k >= scores.shape[-1]:
            return scores
        kth = torch.topk(scores, self.k, dim=-1).values[..., -1:]
        return scores.masked_fill(scores < kth, float("-inf"))


class TopP(_Stage):
    """Keep the most likely tokens, in order, until their probabilities add up to p (at least one)."""

    def __init__(self, p: float):
        self.p, self.stage = p, ("top_p", float(p))

    def __call__(self, input_ids, scores):
        if self.p >= 1.0:
            return scores
        probs = torch.softmax(scores, dim=-1)
        ordered, index = torch.sort(probs, descending=True, dim=-1)
        before = torch.cumsum(ordered, dim=-1) - ordered          # the mass of the tokens ranked above each one
        drop_sorted = before >= self.p
        drop_sorted[..., 0] = False
        drop = drop_sorted.scatter(-1, index, drop_sorted)
        return scores.masked_fill(drop, float("-inf"))


class MinP(_Stage):
    """Keep the tokens at least min_p times as likely as the top one: logit >= top logit + ln(min_p)."""

    def __init__(self, min_p: float):
        self.min_p, self.stage = min_p, ("min_p", float(min_p))

    def __call__(self, input_ids, scores):
        if self.min_p <= 0.0:
            return scores
        floor = scores.max(dim=-1, keepdim=True).values + math.log(self.min_p)
        return scores.masked_fill(scores < floor, float("-inf"))


class Temperature(_Stage):
    def __init__(self, temperature: float):
        self.temperature, self.stage = temperature, ("temperature", float(temperature))

    def __call__(self, input_ids, scores):
        return scores / self.temperature


def llama_cpp_processors(config) -> LogitsProcessorList:
    """penalty → top-k → top-p → min-p → temperature, each stage only when its setting is on (as engine.shaping
    builds transformers' list). The penalty is transformers' own: both engines divide a positive logit by it."""
    processors = LogitsProcessorList()
    if config.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(config.repetition_penalty))
    if config.strategy in WARPED_STRATEGIES:
        if config.top_k != 0:
            processors.append(TopK(config.top_k))
        if config.top_p < 1.0:
            processors.append(TopP(config.top_p))
        if config.min_p > 0.0:
            processors.append(MinP(config.min_p))
        if config.temperature != 1.0:
            processors.append(Temperature(config.temperature))
    return processors


def kept(processors, context: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """[V] bool: the tokens a chain leaves, for raw logits [V]."""
    return ~torch.isneginf(processors(context, logits[None].clone())[0])


def disputed(logits: torch.Tensor, kept_a: torch.Tensor, kept_b: torch.Tensor) -> list:
    """Token ids one chain keeps and the other drops, most likely first."""
    differ = (kept_a ^ kept_b).nonzero().flatten()
    return differ[torch.argsort(logits[differ], descending=True)].tolist()
