"""vLLM's samplers as logits processors, after its V1 sampler (vllm/v1/sample/sampler.py, ops/penalties.py,
ops/topk_topp_sampler.py, model_executor/layers/utils.py `apply_penalties`).

What differs from the engines of the same names:
  - penalties: the repetition penalty counts the prompt's tokens and the output's; frequency and presence
    count the output's only (OpenAI's definition): logit -= frequency · count + presence · [count > 0];
  - temperature comes before min-p (as in transformers, unlike llama.cpp), and greedy decoding takes the
    argmax right after the penalties;
  - top-k keeps every tie at the k-th place (as transformers does); top-p keeps at least the top token.
"""
from __future__ import annotations

import torch

from engine.samplers.chain import NEG_INF, ChainStage


class Penalties(ChainStage):
    """Repetition on prompt and output tokens, then frequency and presence on output tokens only. The prompt's
    length comes from `prepare`; without it the whole context counts as output."""

    def __init__(self, repetition: float, frequency: float, presence: float):
        super().__init__()
        self.repetition, self.frequency, self.presence = repetition, frequency, presence
        self.prompt_length = 0
        self.stage = ("penalties", float(repetition))

    def prepare(self, prompt_length=None, token_texts=None, tokenize=None) -> None:
        if prompt_length is not None:
            self.prompt_length = int(prompt_length)

    def __call__(self, input_ids, scores):
        vocab = scores.shape[-1]
        scores = scores.clone()
        for row in range(scores.shape[0]):
            ids = input_ids[row]
            ids = ids[(ids >= 0) & (ids < vocab)]
            output = ids[self.prompt_length:]
            if row == 0:
                self.last_state = {"window": int(output.numel())}
            seen = torch.bincount(ids, minlength=vocab) > 0
            counts = torch.bincount(output, minlength=vocab).to(scores.dtype)
            logits = scores[row]
            repeated = torch.where(logits > 0, logits / self.repetition, logits * self.repetition)
            logits = torch.where(seen, repeated, logits)
            scores[row] = logits - self.frequency * counts - self.presence * (counts > 0).to(scores.dtype)
        return scores


class Temperature(ChainStage):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature, self.stage = temperature, ("temperature", float(temperature))

    def __call__(self, input_ids, scores):
        return scores / self.temperature


class MinP(ChainStage):
    """Drop the tokens below min_p times the top probability (vLLM's MinPLogitsProcessor, after temperature)."""

    def __init__(self, min_p: float):
        super().__init__()
        self.min_p, self.stage = min_p, ("min_p", float(min_p))

    def __call__(self, input_ids, scores):
        if self.min_p <= 0:
            return scores
        probs = torch.softmax(scores, dim=-1)
        return scores.masked_fill(probs < probs.max(-1, keepdim=True).values * self.min_p, NEG_INF)


class TopK(ChainStage):
    """Keep the tokens whose logit is at least the k-th largest: ties at the k-th place all stay."""

    def __init__(self, k: int):
        super().__init__()
        self.k, self.stage = k, ("top_k", float(k))

    def __call__(self, input_ids, scores):
        if self.k <= 0 or self.k >= scores.shape[-1]:
            return scores
        kth = torch.topk(scores, self.k, dim=-1).values[..., -1:]
        return scores.masked_fill(scores < kth, NEG_INF)


class TopP(ChainStage):
    """apply_top_k_top_p: sort ascending, drop the tokens whose cumulative probability is at most 1 - p;
    the most likely token always stays."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.stage = p, ("top_p", float(p))

    def __call__(self, input_ids, scores):
        if self.p >= 1.0:
            return scores
        drop = torch.isneginf(scores)
        for row in range(scores.shape[0]):
            ids = (~drop[row]).nonzero().flatten()               # sort only the tokens still possible
            if ids.numel() == 0:
                continue
            ordered, index = torch.sort(scores[row, ids], descending=False)
            cumulative = torch.softmax(ordered, dim=-1).cumsum(dim=-1)
            drop_sorted = cumulative <= 1 - self.p
            drop_sorted[-1] = False
            drop[row, ids[index[drop_sorted]]] = True
        return scores.masked_fill(drop, NEG_INF)
