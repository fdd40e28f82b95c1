"""Two probes at one step of a lane: how the model reads the vector it was fed.

  1. single-threaded: the next-token distribution after the fed vector against the one after feeding only its
     top-1 id, and only its top-2 id (Jensen-Shannon divergence, nats). An untrained model that reads a mixture
     as its top token gives JS(top-1) near 0 and JS(top-2) large;
  2. the linearisation gap: the next distribution of the mixture of the top k <= 5 tokens, f(sum w_i e_i), against
     the mixture of their next distributions, sum w_i f(e_i), the exact one-step marginal of sampling among them.
     Soft Thinking assumes the two are close.
Every row is the same prefix (the prompt and the lane's own inputs up to the step) with one last input; they run
as one batch of one forward pass, without a cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model import LoadedModel
from engine.decoding.runner import forward_kwargs
from ..trace import Neighbour, Trace

GAP_TOKENS = 5


@dataclass(frozen=True)
class Probe:
    step: int                 # 0-based
    top1: Neighbour           # the fed vector's heaviest token (value: its weight; 0 when not in the mixture)
    top2: Neighbour
    js_top1: float            # JS(next | fed vector, next | top-1 id), nats
    js_top2: float            # JS(next | fed vector, next | top-2 id)
    gap: float | None         # JS(f(sum w_i e_i), sum w_i f(e_i)) over the top k; None for a hidden state
    gap_tokens: int           # k
    after_fed: list           # [Neighbour] the top next tokens after the fed vector (value: probability)
    after_top1: list          # [Neighbour] after the top-1 id


def js_divergence(p: torch.Tensor, q: torch.Tensor) -> float:
    """Jensen-Shannon divergence in nats: (KL(p || m) + KL(q || m)) / 2, m = (p + q) / 2; 0 <= JS <= log 2."""
    p, q = p.double(), q.double()
    m = (p + q) / 2
    kl = lambda a: float((torch.xlogy(a, a) - torch.xlogy(a, m)).sum())     # noqa: E731  (0 log 0 = 0)
    return max(0.0, (kl(p) + kl(q)) / 2)


def _ranked_ids(step) -> list:
    """The fed tokens by weight, then the step's candidates by probability after the chain (for a hidden state
    or a single id, top-2 is the model's runner-up)."""
    ids = list(step.fed_ids)
    for cand in sorted(step.candidates, key=lambda c: -c.shaped_prob):
        if cand.token_id not in ids:
            ids.append(cand.token_id)
    return ids


@torch.inference_mode()
def probe(lm: LoadedModel, trace: Trace, vectors: list, index: int) -> Probe:
    """The probes at step `index` of a lane; vectors: the lane's fed vectors per step (lanes.LaneRun.vectors)."""
    step = trace.steps[index]
    layer = lm.model.get_input_embeddings()
    scale = 1.0 if lm.embed_scale is None else float(lm.embed_scale)
    ranked = _ranked_ids(step)
    weight = dict(zip(step.fed_ids, step.fed_weights))
    k = min(GAP_TOKENS, len(step.fed_ids))
    gap_ids = step.fed_ids[:k]
    w = torch.tensor(step.fed_weights[:k], dtype=torch.float32)
    w = w / w.sum() if k else w
    ids = list(dict.fromkeys(ranked[:2] + gap_ids))
    E = lm.embeddings
    rows = [vectors[index]] + [E[i].float() * scale for i in ids]
    if k:
        rows.append((w @ E[gap_ids].float()) * scale)
    last = torch.stack(rows)[:, None].to(layer.weight.device, layer.weight.dtype)          # [R, 1, hidden]
    prompt = layer(torch.tensor([trace.prompt_token_ids], device=layer.weight.device))  # [1, P, hidden]
    before = torch.stack(vectors[:index]).to(layer.weight.device, layer.weight.dtype)[None] if index else None
    prefix = prompt if before is None else torch.cat([prompt, before], dim=1)
    embeds = torch.cat([prefix.expand(len(rows), -1, -1), last], dim=1)
    logits = lm.model(inputs_embeds=embeds, **forward_kwargs(lm.model)).logits[:, -1].to("cpu", torch.float32)
    probs = torch.softmax(logits, dim=-1)
    after = {token: probs[1 + j] for j, token in enumerate(ids)}
    gap = None
    if k and step.fed and step.fed.kind != "hidden":
        marginal = sum(w[j] * after[token] for j, token in enumerate(gap_ids))
        gap = js_divergence(probs[-1], marginal)

    def top(p):
        values, where = torch.topk(p, k=min(5, p.shape[-1]))
        return [Neighbour(int(i), lm.token_texts[int(i)], float(v)) for v, i in zip(values, where)]

    first, second = ranked[0], ranked[1]
    return Probe(step=index, top1=Neighbour(first, lm.token_texts[first], float(weight.get(first, 0.0))),
                 top2=Neighbour(second, lm.token_texts[second], float(weight.get(second, 0.0))),
                 js_top1=js_divergence(probs[0], after[first]), js_top2=js_divergence(probs[0], after[second]),
                 gap=gap, gap_tokens=k, after_fed=top(probs[0]), after_top1=top(after[first]))
