"""Which distribution a whole-answer number is about, and the next-token log-probabilities under it.

Two choices, and every number names one:
  - "model": the model's own softmax, temperature 1, nothing cut;
  - "sampler": the distribution a sampler draws from, after transformers' processors (repetition penalty,
    temperature, top-k, top-p, min-p, in `generate`'s order), tokens cut to probability 0.

The log-probabilities are computed in float64, so that masses summed over thousands of nodes still add up
to 1 to about 1e-12, and the ledger's check is a check of the search, not of float32's rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import DecodeConfig
from ..errors import ConfigError
from engine.samplers.shaping import build_processors

DISTRIBUTIONS = ("model", "sampler")


@dataclass(frozen=True)
class Distribution:
    """The distribution the tree describes: the model's own, or the sampler's with these settings."""
    kind: str = "model"               # model | sampler
    temperature: float = 1.0          # the sampler's settings (ignored for "model")
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    def check(self) -> "Distribution":
        if self.kind not in DISTRIBUTIONS:
            raise ConfigError("distribution", f"distribution: '{str(self.kind)[:40]}' is not one of "
                                              f"{', '.join(DISTRIBUTIONS)}")
        self.config().validate()       # the sampler's ranges, named as the decode's own flags name them
        return self

    def config(self) -> DecodeConfig:
        """The sampling settings as a DecodeConfig (strategy 'sample'), for the processors and the samples."""
        if self.kind == "model":
            return DecodeConfig(strategy="sample")
        return DecodeConfig(strategy="sample", temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                            min_p=self.min_p, repetition_penalty=self.repetition_penalty)

    def describe(self) -> str:
        """One line for every place a number is shown."""
        if self.kind == "model":
            return "the model's distribution (temperature 1, nothing cut)"
        from engine.samplers.stages import describe

        return f"the sampler's distribution ({describe(self.config())})"


def next_logprobs(dist: Distribution, rows: list, logits: torch.Tensor) -> torch.Tensor:
    """[len(rows), V] float64 log-probabilities of the next token, -inf where the sampler cut a token.
    rows: each row's whole input so far (prompt and path), which the repetition penalty reads;
    logits: [len(rows), V] the model's logits at each row's last position."""
    scores = logits.to("cpu", torch.float64)
    if dist.kind == "sampler":
        processors = build_processors(dist.config())
        if len(processors):
            scores = torch.cat([processors(torch.tensor([row]), scores[i:i + 1].clone())
                                for i, row in enumerate(rows)])
    return torch.log_softmax(scores, dim=-1)


def entropy_and_varentropy(logprobs: torch.Tensor) -> tuple:
    """(H, V) in nats over the last dim: H = E[-log p], V = Var[-log p] = sum p (log p + H)^2.
    Tokens of probability 0 add nothing to either."""
    p = logprobs.exp()
    finite = torch.isfinite(logprobs)
    lp = torch.where(finite, logprobs, torch.zeros_like(logprobs))
    h = -(p * lp).sum(-1)
    v = (p * (lp + h.unsqueeze(-1)) ** 2).sum(-1)
    return h, v
