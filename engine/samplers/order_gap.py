"""Where the same settings in different engines' orders differ most in probability, not only in the tokens kept.

Two orders can keep the very same tokens and still sample from different distributions: llama.cpp's DRY takes
a repeated token from 0.81 to nearly 0 while transformers' and vLLM's chains, which have no DRY, leave it at
0.81. Counting kept tokens says "the same"; the largest gap between the orders' final probabilities says what
changed, for which token, and which stage did it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Gap:
    """The token whose final probability differs most between the orders."""
    token: int
    raw: float             # its probability before any stage
    probs: dict            # order -> its final probability in that order
    order: str             # the order whose final probability is furthest from `raw`
    stage: str | None      # that order's stage that moved it most (None: no stage in that order)
    before: float          # its probability before that stage
    after: float           # and after it

    @property
    def size(self) -> float:
        return max(self.probs.values()) - min(self.probs.values())


def final_probs(chain, logits: torch.Tensor) -> torch.Tensor:
    """[V] the distribution a chain samples from (the raw one when the chain has no stage)."""
    scores = chain.staged[-1][0] if chain.staged else logits
    return torch.softmax(scores.double(), -1)


def largest_gap(chains: list, logits: torch.Tensor) -> Gap:
    """The token whose final probability differs most between `chains` (OrderedChain, one per order, all for
    the same raw logits [V]), with the stage that moved it most in the order furthest from the raw value."""
    finals = torch.stack([final_probs(c, logits) for c in chains])
    spread = finals.max(0).values - finals.min(0).values
    token = int(spread.argmax())
    raw_probs = torch.softmax(logits.double(), -1)
    raw = float(raw_probs[token])
    furthest = int((finals[:, token] - raw).abs().argmax())
    chain = chains[furthest]
    stage, before, after, moved = None, raw, raw, -1.0
    previous = raw
    for record, scores in zip(chain.stages, chain.staged):
        now = float(torch.softmax(scores[0].double(), -1)[token])
        if abs(now - previous) > moved:
            stage, before, after, moved = record.name, previous, now, abs(now - previous)
        previous = now
    return Gap(token=token, raw=raw, probs={c.order: float(finals[i, token]) for i, c in enumerate(chains)},
               order=chain.order, stage=stage, before=before, after=after)
