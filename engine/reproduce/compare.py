"""A run against the reference (the prompt alone): per step how far the logits moved, how close the top two were,
and whether a flip was possible there.

At step t let s be the reference's scores and s' = s + Δ this run's, m this run's margin (its top score minus its
runner-up) and e = max_v |Δ_v|. If the reference picks a and this run picks b != a, then s_a >= s_b, so
m <= s'_b - s'_a = (s_b - s_a) + (Δ_b - Δ_a) <= 2e; the reference's own margin obeys the same bound. So a flip
needs m <= 2e (and e > 0: equal scores pick equal tokens). A step where that holds is *fragile*, and every flip
happens at a fragile step: the detector cannot miss one. Greedy scores are the logits in float64, where the
differences of float32 or bfloat16 numbers are exact, so the test is exact; sampled scores add noise in float64
and the test allows for their rounding.

After the first divergence the two runs read different texts and their logits are no longer comparable: those
steps carry no change and no fragile flag, only this run's own margin.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from ..tokens import first_difference
from .runs import Picker, Run

ROUNDING = 2.0 ** -50           # relative slack for sampled (float64) scores


@dataclass(frozen=True)
class StepCheck:
    max_abs_delta: float | None     # max |Δ| of the scores against the reference; None once the texts differ
    where: int | None               # the token id whose score moved most
    margin: float                   # top-1 minus top-2 score of this run
    top2_ids: tuple                 # (top-1, top-2) of this run
    fragile: bool | None            # margin <= 2 max |Δ| (and Δ > 0); None once the texts differ


@dataclass(frozen=True)
class Comparison:
    steps: list                     # [StepCheck] one per step of the run
    first_divergence: int | None    # index of the first step whose token differs from the reference's (0-based)
    logits_sha256: str
    status: str                     # "identical" (tokens and every bit), "bits" (same tokens), "tokens"

    @property
    def fragile_steps(self) -> list:
        return [i for i, s in enumerate(self.steps) if s.fragile]

    @property
    def max_delta(self) -> float:
        return max((s.max_abs_delta for s in self.steps if s.max_abs_delta is not None), default=0.0)


def top_two(scores: torch.Tensor) -> tuple:
    """(top-1 id, top-2 id, margin): the argmax (first index among ties), then the argmax of the rest."""
    first = int(torch.argmax(scores))
    rest = scores.clone()
    rest[first] = float("-inf")
    second = int(torch.argmax(rest))
    return first, second, float(scores[first] - scores[second])


def is_fragile(margin: float, delta: float, slack: float = 0.0) -> bool:
    """A flip is possible only when the margin is at most twice the largest change (module docstring)."""
    return delta > 0.0 and margin <= 2.0 * delta + slack


def largest_change(scores: torch.Tensor, reference: torch.Tensor) -> tuple:
    """(max |Δ|, the id where it is) between two score vectors in float64; equal values count 0 (so -inf = -inf)."""
    diff = torch.where(scores == reference, torch.zeros_like(scores), (scores - reference).abs())
    where = int(torch.argmax(diff))
    return float(diff[where]), where


def logits_sha256(logits: torch.Tensor) -> str:
    """SHA-256 of the logits' bytes as the model returned them (dtype and shape included in the hash)."""
    data = logits.detach().to("cpu").contiguous()
    digest = hashlib.sha256(f"{data.dtype}{tuple(data.shape)}".encode())
    digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def compare(reference: Run, run: Run, picker: Picker | None = None) -> Comparison:
    picker = picker or Picker()
    diverged = first_difference(reference.token_ids, run.token_ids)
    steps = []
    for t in range(len(run.token_ids)):
        scores = picker.scores(run.logits[t], t)
        first, second, margin = top_two(scores)
        delta = where = fragile = None
        if t < len(reference.token_ids) and (diverged is None or t <= diverged):
            ref_scores = picker.scores(reference.logits[t], t)
            delta, where = largest_change(scores, ref_scores)
            slack = 0.0 if picker.greedy else ROUNDING * float(scores.abs().max() + ref_scores.abs().max())
            fragile = is_fragile(margin, delta, slack)
        steps.append(StepCheck(delta, where, margin, (first, second), fragile))
    same_bits = reference.logits.shape == run.logits.shape and torch.equal(reference.logits, run.logits)
    status = "tokens" if diverged is not None else "identical" if same_bits else "bits"
    return Comparison(steps, diverged, logits_sha256(run.logits), status)
