"""The target's check of a draft (Leviathan et al. 2023, algorithm 1), as small functions on distributions.

A drafted token x, drawn from the draft's q, is kept with probability min(1, p(x) / q(x)): draw u ~ U(0, 1)
and keep x when u <= p(x) / q(x). At the first rejection the target's token comes from the residual
norm(max(0, p - q)). Kept or replaced, the token is then distributed exactly as p:
  P(y) = q(y) min(1, p(y)/q(y)) + (1 - sum_x min(p(x), q(x))) * max(0, p(y) - q(y)) / sum max(0, p - q)
       = min(p(y), q(y)) + max(0, p(y) - q(y)) = p(y),
because 1 - sum min(p, q) = sum max(0, p - q) = TV(p, q). A draft keeps on average 1 - TV(p, q) per position.
"""
from __future__ import annotations

import torch

from ..trace import PairProb, StageToken

PAIR_TOP = 10          # tokens of p and of q recorded at a checked position
RESIDUAL_TOP = 10      # tokens of the residual recorded at a rejection


def keeps(u: float, p_x: float, q_x: float) -> bool:
    """The acceptance test on plain numbers, the same comparison a trace's reader recomputes."""
    return q_x <= 0.0 or u <= p_x / q_x


def residual(p: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(norm(max(0, p - q)), its mass before normalising = TV(p, q)). p, q: [V]. Where p == q the residual
    is empty and a rejection cannot happen; p itself is returned then."""
    rest = (p - q).clamp_min(0.0)
    mass = float(rest.sum())
    return (rest / mass, mass) if mass > 0 else (p, 0.0)


def overlap(p: torch.Tensor, q: torch.Tensor) -> float:
    """sum min(p, q) = 1 - TV(p, q): the chance that a token drawn from q is kept."""
    return float(torch.minimum(p, q).sum())


def pairs(token_texts: list, p: torch.Tensor, q: torch.Tensor | None, top: int = PAIR_TOP,
          must: int | None = None) -> list:
    """[PairProb] the top tokens of p and of q at one position, and `must` (the token drafted or drawn there),
    by p then q (q None: no draft there)."""
    ids = torch.topk(p, min(top, p.shape[-1])).indices.tolist()
    if q is not None:
        ids += [t for t in torch.topk(q, min(top, q.shape[-1])).indices.tolist() if t not in ids]
    if must is not None and must not in ids:
        ids.append(must)
    rows = [PairProb(token_id=t, text=token_texts[t], p=float(p[t]), q=float(q[t]) if q is not None else 0.0)
            for t in ids]
    return sorted(rows, key=lambda r: (-r.p, -r.q))


def residual_tokens(token_texts: list, rest: torch.Tensor, top: int = RESIDUAL_TOP) -> list:
    """[StageToken] the residual's most likely tokens (its probabilities after renormalising)."""
    best = torch.topk(rest, min(top, rest.shape[-1]))
    return [StageToken(token_id=int(t), text=token_texts[int(t)], prob=float(v))
            for v, t in zip(best.values.tolist(), best.indices.tolist()) if v > 0]


def expected_tokens_per_round(alpha: float, k: int) -> float:
    """(1 - alpha^(K+1)) / (1 - alpha): tokens one round emits when each draft is kept with chance alpha,
    independently (the kept prefix, plus the corrected or bonus token)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
