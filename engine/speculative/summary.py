"""What a speculative trace adds up to: how often drafts were kept, where, and what that predicts."""
from __future__ import annotations

from dataclasses import dataclass

from .verify import expected_tokens_per_round


@dataclass(frozen=True)
class Acceptance:
    checked: int             # drafts the target checked (kept or rejected)
    kept: int
    alpha: float             # kept / checked: the measured chance a draft is kept
    rates: list              # kept / checked at draft position 1..K
    counts: list             # drafts checked at each position
    rounds: int
    tokens: int
    tokens_per_round: float  # measured
    predicted: float         # (1 - alpha^(K+1)) / (1 - alpha) with the measured alpha
    target_passes: int
    draft_passes: int


def acceptance(trace) -> Acceptance:
    """The acceptance figures of a speculative trace (its rounds, read from the file or just decoded)."""
    k = trace.config.draft_tokens
    checked_at, kept_at = [0] * k, [0] * k
    for rnd in trace.rounds:
        for j, draft in enumerate(rnd.drafts[:k]):
            if draft.status != "unchecked":
                checked_at[j] += 1
                kept_at[j] += draft.status == "kept"
    checked, kept = sum(checked_at), sum(kept_at)
    alpha = kept / checked if checked else 0.0
    rounds, tokens = len(trace.rounds), len(trace.steps)
    return Acceptance(checked=checked, kept=kept, alpha=alpha,
                      rates=[kept_at[j] / checked_at[j] if checked_at[j] else 0.0 for j in range(k)],
                      counts=checked_at, rounds=rounds, tokens=tokens, tokens_per_round=tokens / max(rounds, 1),
                      predicted=expected_tokens_per_round(alpha, k),
                      target_passes=sum(r.target_passes for r in trace.rounds),
                      draft_passes=sum(r.draft_passes for r in trace.rounds))
