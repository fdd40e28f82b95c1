"""One step's measures of a fed vector: where it lies among the token embeddings and how far from its own token.

  - its 10 nearest tokens by cosine (engine.decoding.record's exact search);
  - its cosine to the emitted token's embedding, and both norms as the model receives them: mixtures of
    nearly orthogonal rows are shorter than any row, one signature of an input never seen in training;
  - the participation ratio 1 / sum w^2, how many tokens the mixture really holds.
"""
from __future__ import annotations

import torch

from ..model import LoadedModel
from engine.decoding.record import NEIGHBOURS, nearest_by_cosine
from ..trace import FedInput, Neighbour
from .rules import Fed, participation


def fed_measures(lm: LoadedModel, fed: Fed, vector: torch.Tensor, *, entropy: float, low_steps: int,
                 cold_stop: bool, rule_seconds: float) -> FedInput:
    """vector: [hidden] the fed input as the model receives it (after the embedding scale), float32 on the CPU."""
    scale = 1.0 if lm.embed_scale is None else float(lm.embed_scale)
    norm = vector.norm().clamp_min(1e-12)
    values, ids = nearest_by_cosine(lm, vector, norm, NEIGHBOURS)        # cosine ignores the scale
    row = lm.embeddings[fed.emitted].float()
    row_norm = lm.embedding_norms[fed.emitted]
    cosine = float((row @ vector) / (row_norm * norm))
    return FedInput(kind=fed.kind, nearest=[Neighbour(int(i), lm.token_texts[int(i)], float(v))
                                            for v, i in zip(values, ids)],
                    emitted_cosine=max(-1.0, min(1.0, cosine)), norm=float(norm), emitted_norm=float(row_norm) * scale,
                    participation=participation(fed.weights), entropy=entropy, low_steps=low_steps,
                    cold_stop=cold_stop, rule_seconds=rule_seconds)
