"""Turn one step's tensors into plain records: candidates, fed-back vector, KV cache."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.decoding.kv import BLOCK_SIZE, paged_layout
from engine.model import LoadedModel
from engine.samplers.shaping import entropy, varentropy
from engine.trace import Candidate, FeedBack, KVStep, Neighbour

NEIGHBOURS = 10


@dataclass(frozen=True)
class Distribution:
    """One step's next-token distribution as a Step records it: the top candidates, before and after shaping."""
    candidates: list[Candidate]     # top-N by raw logit, plus the chosen token if it ranked lower
    entropy: float                  # of the raw distribution, in nats
    varentropy: float               # of the raw distribution: Var[-log p], in nats^2
    shaped_entropy: float           # of the distribution after the strategy's processors
    removed_mass: float             # raw probability of the tokens the processors cut
    kept_count: int                 # tokens the processors left


def candidates_record(lm: LoadedModel, logits: torch.Tensor, shaped: torch.Tensor, top_n: int,
                      must_include=()) -> Distribution:
    """logits, shaped: [vocab] float32 raw and shaped scores. Returns the step's distribution."""
    logprobs = torch.log_softmax(logits, dim=-1)
    probs = logprobs.exp()
    shaped_probs = torch.softmax(shaped, dim=-1)
    cut = torch.isneginf(shaped)
    top = torch.topk(logits, k=min(top_n, logits.shape[-1]))
    ids = top.indices.tolist()
    for extra in must_include:          # the chosen token, even when ranked below top-N
        if extra not in ids:
            ids.append(int(extra))
    rows = []
    for i, token_id in enumerate(ids):
        rank = i + 1 if i < top_n else int((logits > logits[token_id]).sum()) + 1
        rows.append(Candidate(
            token_id=int(token_id), text=lm.token_texts[token_id], logit=float(logits[token_id]),
            prob=float(probs[token_id]), logprob=float(logprobs[token_id]), rank=rank,
            shaped_prob=float(shaped_probs[token_id]), kept=not bool(cut[token_id])))
    return Distribution(
        candidates=rows,
        entropy=float(entropy(probs)),
        varentropy=float(varentropy(probs)),
        shaped_entropy=float(entropy(shaped_probs)),
        removed_mass=float(probs[cut].sum()),
        kept_count=int((~cut).sum()),
    )


SHORTLIST = 256    # float16 candidates re-ranked exactly; far more than the 10 shown


def nearest_by_cosine(lm: LoadedModel, vector: torch.Tensor, norm: torch.Tensor, k: int):
    """(values, indices) of the k tokens with the highest cosine to `vector`, exact in float32.

    A float16 pass over unit-length rows shortlists SHORTLIST candidates (its error is about
    1e-3, far below the gap between the 10th and the 256th cosine), then the shortlist's
    cosines are computed exactly and ranked."""
    E = lm.embeddings
    vocab = E.shape[0]
    if vocab <= SHORTLIST:
        cosine = (E @ vector) / (lm.embedding_norms * norm)
        top = torch.topk(cosine, k=min(k, vocab))
        return top.values, top.indices
    rough = lm.unit_embeddings_half @ (vector / norm).half()
    short = torch.topk(rough.float(), k=SHORTLIST).indices
    exact = (E[short] @ vector) / (lm.embedding_norms[short] * norm)
    top = torch.topk(exact, k=min(k, SHORTLIST))
    return top.values, short[top.indices]


def feedback_record(lm: LoadedModel, weights: torch.Tensor, vector: torch.Tensor) -> FeedBack:
    """weights: [vocab] the mixture fed back (p or the Gumbel sample); vector: [hidden] = weights @ E."""
    norm = vector.norm().clamp_min(1e-12)
    near_values, near_ids = nearest_by_cosine(lm, vector, norm, NEIGHBOURS)
    heavy = torch.topk(weights, k=min(NEIGHBOURS, weights.shape[-1]))
    best = int(near_ids[0])
    argmax = int(weights.argmax())
    return FeedBack(
        nearest=[Neighbour(int(i), lm.token_texts[int(i)], float(v)) for v, i in zip(near_values, near_ids)],
        nearest_cosine=float(near_values[0]),
        weights=[Neighbour(int(i), lm.token_texts[int(i)], float(v)) for v, i in zip(heavy.values, heavy.indices)],
        argmax_id=argmax, argmax_text=lm.token_texts[argmax],
        entropy=float(entropy(weights)), norm=float(norm), nearest_norm=float(lm.embedding_norms[best]),
    )


def kv_record(bytes_per_row: int, *, rows_per_beam: int, cache_bytes: int, beams: int, appended: int,
              copied: int, cached_sequences: list) -> KVStep:
    """The cache after a step. rows_per_beam and cache_bytes are read off the real cache tensors;
    appended/copied: rows written by the forward pass / moved by a beam reorder;
    cached_sequences: the token ids each beam's cache rows hold, for the paged accounting."""
    layout = paged_layout(cached_sequences)
    return KVStep(rows=beams * rows_per_beam, bytes=cache_bytes, rows_appended=appended, rows_copied=copied,
                  paged_rows=layout.rows, paged_blocks=len(layout.blocks),
                  paged_bytes=len(layout.blocks) * BLOCK_SIZE * bytes_per_row,
                  beam_rows=[rows_per_beam] * beams)
