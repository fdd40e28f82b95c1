"""The feed-back rules on tensors: which tokens a step mixes, with which weights, and which id it emits.

Each rule takes the step's distributions and returns a `Fed`: token ids with weights (most weight first, summing
to 1), the emitted id, and what kind of input it is. The vector fed is then sum w_i E[i] over those k rows (k*d
multiply-adds, not V*d), given to the model through `LoadedModel.model_inputs`, which applies an embedding scale
(Gemma's sqrt(hidden)) once. Every random draw uses the decode's seeded torch.Generator.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from engine.samplers.shaping import entropy

MOI_CANDIDATES = 20          # Mixture of Inputs' prior: vLLM's 20 returned logprobs
DENSE_FROM = 4096            # mixing more rows than this: one product over all of E beats gathering the rows
DIRICHLET_FLOOR = 1e-7       # tokens below this probability take no part in the Dirichlet draw (Wu et al.)


@dataclass(frozen=True)
class Fed:
    """One step's choice: token ids and weights (most weight first; empty for a hidden state), the id emitted."""
    ids: torch.Tensor        # [n] long
    weights: torch.Tensor    # [n] float32, summing to 1
    emitted: int
    kind: str                # mixture | id | hidden


def one_id(token: int) -> Fed:
    return Fed(torch.tensor([token]), torch.ones(1), token, "id")


def _sorted(ids: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Most weight first (stable, so ties keep their order), tokens of weight 0 left out."""
    order = torch.sort(weights, descending=True, stable=True).indices
    ids, weights = ids[order], weights[order]
    keep = weights > 0
    return ids[keep], weights[keep]


def mixture_vector(E: torch.Tensor, fed: Fed) -> torch.Tensor:
    """sum_i w_i E[id_i]: [hidden], from the k rows only (k*d); for a mixture of most of the vocabulary, as p^T E
    over all of E (V*d, but without copying k rows first: 0.18 s a step for SmolLM2's 49,152 rows)."""
    weights = fed.weights.to(E.dtype)
    if len(fed.ids) > DENSE_FROM:
        dense = torch.zeros(E.shape[0], dtype=E.dtype)
        dense[fed.ids] = weights
        return dense @ E
    return weights @ E[fed.ids]


# ---- Soft Thinking ------------------------------------------------------------------------------
def dirichlet(probs: torch.Tensor, alpha: float, generator: torch.Generator) -> torch.Tensor:
    """weights ~ Dir(alpha * p) over the tokens p keeps (p >= 1e-7), drawn as normalised Gamma variates. NumPy draws
    them from a seed taken off the decode's generator, so a run stays reproducible from its seed."""
    keep = probs >= DIRICHLET_FLOOR
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    concentration = (alpha * probs[keep]).double().numpy()
    gammas = np.random.default_rng(seed).gamma(concentration)
    out = torch.zeros_like(probs)
    total = gammas.sum()
    if total > 0:
        out[keep] = torch.from_numpy(gammas / total).to(probs.dtype)
    else:                    # every Gamma draw underflowed: keep p itself
        out[keep] = probs[keep] / probs[keep].sum()
    return out


def gumbel_noise(shape, generator: torch.Generator) -> torch.Tensor:
    """g ~ Gumbel(0, 1), as engine.decoding.decoder draws it."""
    u = torch.rand(shape, generator=generator).clamp(1e-10, 1 - 1e-10)
    return -torch.log(-torch.log(u))


def soft_thinking(probs: torch.Tensor, max_topk: int, generator: torch.Generator, gumbel_tau: float = 0.0,
                  dirichlet_alpha: float = 0.0) -> Fed:
    """probs: [V] the distribution after the chain (temperature, then top-k, top-p and min-p, each renormalised).
    Optional Dirichlet noise; the top `max_topk`, renormalised; optional Gumbel-softmax on those k
    (softmax((log w + g) / tau_g)), sorted again; the emitted id is the heaviest: the argmax without noise
    (greedy), a Gumbel-max sample from the truncated p with it."""
    if dirichlet_alpha > 0:
        probs = dirichlet(probs, dirichlet_alpha, generator)
    top = torch.topk(probs, k=min(max_topk, probs.shape[-1]))
    ids, weights = _sorted(top.indices, top.values)
    weights = weights / weights.sum()
    if gumbel_tau > 0:
        weights = torch.softmax((torch.log(weights) + gumbel_noise(weights.shape, generator)) / gumbel_tau, dim=-1)
        ids, weights = _sorted(ids, weights)
        weights = weights / weights.sum()
    kind = "id" if len(ids) == 1 else "mixture"
    return Fed(ids, weights, int(ids[0]), kind)


class ColdStop:
    """Soft Thinking's stop: count the steps in a row whose entropy is below tau; at the L-th the soft phase ends
    (the published code then closes the thinking and samples ids). tau in nats, of the temperature-scaled,
    untruncated distribution."""

    def __init__(self, tau: float, steps: int):
        self.tau, self.steps = tau, steps
        self.low = 0
        self.stopped = False

    def update(self, value: float) -> bool:
        """Read one step's entropy; True exactly at the step where the stop fires."""
        if self.stopped:
            return False
        self.low = self.low + 1 if value < self.tau else 0
        if self.low >= self.steps:
            self.stopped = True
            return True
        return False


def cold_entropy(logits: torch.Tensor, temperature: float) -> float:
    """Entropy in nats of softmax(logits / T) over the whole vocabulary: what Cold Stop reads."""
    return float(entropy(torch.softmax(logits / temperature, dim=-1)))


# ---- Mixture of Inputs --------------------------------------------------------------------------
def moi_weights(logits: torch.Tensor, sampled: int, beta: float, candidates: int = MOI_CANDIDATES) -> Fed:
    """logits: [V] raw (vLLM's returned logprobs come before temperature and top-p); sampled: the id y drawn as
    plain sampling draws it. prior = softmax over the top-20 logits; H_n = H(prior) / log 20;
    w = (H_n * prior + (beta + 1 - H_n) * onehot(y)) / (beta + 1). beta = inf feeds y alone (plain sampling)."""
    if math.isinf(beta):
        return one_id(sampled)
    top = torch.topk(logits, k=min(candidates, logits.shape[-1]))
    prior = torch.softmax(top.values, dim=-1)
    spread = float(entropy(prior)) / math.log(len(prior)) if len(prior) > 1 else 0.0
    ids = top.indices
    if sampled not in ids.tolist():
        ids = torch.cat([ids, torch.tensor([sampled])])
        prior = torch.cat([prior, torch.zeros(1)])
    onehot = (ids == sampled).to(prior.dtype)
    weights = (spread * prior + (beta + 1 - spread) * onehot) / (beta + 1)
    ids, weights = _sorted(ids, weights)
    return Fed(ids, weights / weights.sum(), sampled, "id" if len(ids) == 1 else "mixture")


# ---- the multi-token mean ------------------------------------------------------------------------
def multi_token_mean(probs: torch.Tensor, k: int, generator: torch.Generator) -> Fed:
    """K ids drawn from p with replacement; each distinct id weighs its share of the draws, so the fed vector is
    the mean of the K embeddings. The emitted id is the first draw: with K = 1, exactly a sample from p."""
    draws = torch.multinomial(probs, k, replacement=True, generator=generator)
    ids, counts = torch.unique(draws, return_counts=True)
    ids, weights = _sorted(ids, counts.to(torch.float32) / k)
    return Fed(ids, weights, int(draws[0]), "id" if len(ids) == 1 else "mixture")


# ---- the measures every rule shares ------------------------------------------------------------
def participation(weights: torch.Tensor) -> float:
    """1 / sum w^2: 1 for an id, k for k equal weights; how many tokens a mixture really holds."""
    return float(1.0 / weights.double().pow(2).sum()) if len(weights) else math.nan


def multiply_adds(strategy: str, vocab: int, hidden: int, soft_top_k: int = 10, mtm_k: int = 4) -> int:
    """Multiply-adds of forming one step's input from the model's shapes: V*d for the full p^T E (soft, gumbel),
    k*d for a top-k mixture, 21*d at most for Mixture of Inputs (the top 20 and the sampled id), K*d for the
    multi-token mean, 0 for an id (a lookup) and for the hidden state (already computed)."""
    if strategy in ("soft", "gumbel"):
        return vocab * hidden
    if strategy == "soft-thinking":
        return min(soft_top_k, vocab) * hidden
    if strategy == "mixture-of-inputs":
        return min(MOI_CANDIDATES + 1, vocab) * hidden
    if strategy == "multi-token-mean":
        return min(mtm_k, vocab) * hidden
    return 0
