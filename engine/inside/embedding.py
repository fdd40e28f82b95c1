"""Feeding back a distribution instead of a token: the expected embedding e = p^T E and its cost.

  - `soft_lane` runs a soft (or gumbel) decode and keeps, per step, a 2-D picture of the
    fed-back vector among its nearest tokens and heaviest mixture tokens (PCA of their
    embeddings plus e), so "the mixture lies between words" can be seen;
  - `gumbel_sweep` applies one seeded Gumbel draw at several temperatures tau, showing the
    relaxed sample approach one-hot as tau goes to 0;
  - `feedback_cost` counts the extra work of p^T E against an embedding lookup for the
    loaded model and times both.
No Streamlit; records are frozen dataclasses of plain values.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from engine.config import FEEDBACK_STRATEGIES, DecodeConfig
from engine.decoding.decoder import Decoder
from engine.errors import ConfigError
from engine.model import LoadedModel
from engine.decoding.runner import forward_kwargs
from engine.samplers.shaping import entropy
from engine.tokens import encode_prompt
from engine.trace import Neighbour


@dataclass(frozen=True)
class ProjectedToken:
    token_id: int
    text: str
    x: float
    y: float
    cosine: float        # cosine to e
    weight: float        # mixture weight of this token in e
    nearest: bool        # among the 10 nearest tokens to e by cosine


@dataclass(frozen=True)
class Projection:
    """e and some token embeddings on the first two principal axes of those points."""
    step: int
    tokens: list         # [ProjectedToken]
    x: float             # e's coordinates
    y: float
    explained: float     # share of the points' variance the two axes keep (0..1)


@dataclass(frozen=True)
class TauPoint:
    tau: float
    top_weight: float    # largest weight of the relaxed sample
    entropy: float       # of the relaxed sample's weights, nats
    top: list            # [Neighbour] heaviest weights, best first


@dataclass(frozen=True)
class FeedbackCost:
    vocab_size: int
    hidden_size: int
    mixture_multiply_adds: int   # p^T E: vocab x hidden
    mixture_bytes_read: int      # all of E is read once per step
    p_bytes: int                 # the distribution p, in the embedding's precision, kept for the product
    lookup_bytes_read: int       # one row of E
    mixture_seconds: float       # median measured time of p @ E
    lookup_seconds: float        # median measured time of E[id]
    repeats: int


# ---- projection ------------------------------------------------------------------------
def project(lm: LoadedModel, vector: torch.Tensor, step: int, nearest_ids: list, heavy_ids: list,
            weights: torch.Tensor) -> Projection:
    """PCA of E[nearest_ids + heavy_ids] together with `vector` ([hidden]); 2 components."""
    ids = list(dict.fromkeys(list(nearest_ids) + list(heavy_ids)))
    E = lm.embeddings.detach().to(torch.float32)
    points = torch.cat([E[ids], vector.to(torch.float32)[None]])          # [n + 1, hidden]
    centred = points - points.mean(dim=0, keepdim=True)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)
    coords = centred @ vh[:2].T                                           # [n + 1, 2]
    variance = s.pow(2)
    explained = float(variance[:2].sum() / variance.sum().clamp_min(1e-30))
    cos = (E[ids] @ vector) / (lm.embedding_norms[ids] * vector.norm().clamp_min(1e-12))
    near = set(nearest_ids)
    tokens = [ProjectedToken(int(t), lm.token_texts[t], float(coords[k, 0]), float(coords[k, 1]), float(cos[k]),
                             float(weights[t]), t in near) for k, t in enumerate(ids)]
    return Projection(step=step, tokens=tokens, x=float(coords[-1, 0]), y=float(coords[-1, 1]), explained=explained)


# ---- the soft lane -----------------------------------------------------------------------
@torch.inference_mode()
def soft_lane(lm: LoadedModel, prompt: str, config: DecodeConfig):
    """Decode with strategy soft or gumbel; returns (Trace, [Projection] one per step)."""
    if config.strategy not in FEEDBACK_STRATEGIES:
        raise ConfigError("strategy", f"strategy: the soft lane needs soft or gumbel, got '{config.strategy}'")
    decoder = Decoder(lm, prompt, config)
    projections = []
    while not decoder.finished:
        step = decoder.step()
        # the vector the decoder will feed back next: ("embeds", [1, 1, hidden])
        kind, value = decoder.next_input
        if kind != "embeds" or step.feedback is None:
            continue
        vector = value[0, 0]
        weights = torch.zeros(lm.facts.vocab_size)
        for w in step.feedback.weights:
            weights[w.token_id] = w.value
        projections.append(project(lm, vector, step.index, [n.token_id for n in step.feedback.nearest],
                                   [w.token_id for w in step.feedback.weights[:5]], weights))
    return decoder.trace(), projections




# ---- Gumbel-softmax over tau --------------------------------------------------------------
@torch.inference_mode()
def gumbel_sweep(lm: LoadedModel, prompt: str, taus: list, seed: int = 0, temperature: float = 1.0,
                 chat: bool = False) -> list:
    """One Gumbel draw for the first step's distribution, relaxed at each tau: [TauPoint]."""
    ids = encode_prompt(lm, prompt, chat)
    logits = lm.model(input_ids=torch.tensor([ids], device=lm.device),
                      **forward_kwargs(lm.model)).logits[0, -1].to("cpu", torch.float32)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(logp.shape, generator=g).clamp(1e-10, 1 - 1e-10)
    noisy = logp - torch.log(-torch.log(u))              # log p + Gumbel(0, 1) noise
    points = []
    for tau in taus:
        if tau <= 0:
            raise ConfigError("tau", f"tau: must be greater than 0, got {tau}")
        y = torch.softmax(noisy / tau, dim=-1)
        top = torch.topk(y, k=5)
        points.append(TauPoint(tau=float(tau), top_weight=float(top.values[0]), entropy=float(entropy(y)),
                               top=[Neighbour(int(i), lm.token_texts[int(i)], float(v))
                                    for v, i in zip(top.values, top.indices)]))
    return points


# ---- cost ---------------------------------------------------------------------------------
def _median_seconds(fn, repeats: int) -> float:
    fn()   # warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@torch.inference_mode()
def feedback_cost(lm: LoadedModel, repeats: int = 30, seed: int = 0) -> FeedbackCost:
    """Counted and measured cost of feeding back p^T E instead of looking up one row of E, in the
    precision and on the device the model runs in (a bfloat16 model reads 2 bytes per number)."""
    E = lm.model.get_input_embeddings().weight.detach()
    vocab, hidden = E.shape
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(vocab, generator=g), dim=-1).to(E.device, E.dtype)
    token = torch.tensor([int(p.argmax())], device=E.device)
    mixture = _median_seconds(lambda: p @ E, repeats)
    lookup = _median_seconds(lambda: torch.nn.functional.embedding(token, E), repeats)
    size = E.element_size()
    return FeedbackCost(vocab_size=vocab, hidden_size=hidden, mixture_multiply_adds=vocab * hidden,
                        mixture_bytes_read=vocab * hidden * size, p_bytes=vocab * size, lookup_bytes_read=hidden * size,
                        mixture_seconds=mixture, lookup_seconds=lookup, repeats=repeats)
