"""The sampler one stage at a time: the distribution after each of transformers' processors.

`generate` applies its processors in a fixed order: repetition penalty, temperature,
top-k, top-p, min-p (engine.shaping builds them in that order). Applying them one by
one gives the same final scores as applying the list, and shows what each one did:
which tokens it removed, how much probability they held, and the renormalised rest.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from .grammar import GrammarMask
from .shaping import build_processors
from .trace import Stage, StageToken

CUT_SHOWN = 20     # removed tokens kept per stage, best ranked first


def stage_name(processor) -> tuple:
    """(name, setting) of one processor built by engine.shaping.build_processors."""
    if isinstance(processor, RepetitionPenaltyLogitsProcessor):
        return "repetition_penalty", float(processor.penalty)
    if isinstance(processor, TemperatureLogitsWarper):
        return "temperature", float(processor.temperature)
    if isinstance(processor, TopKLogitsWarper):
        return "top_k", float(processor.top_k)
    if isinstance(processor, TopPLogitsWarper):
        return "top_p", float(processor.top_p)
    if isinstance(processor, MinPLogitsWarper):
        return "min_p", float(processor.min_p)
    if isinstance(processor, GrammarMask):
        return "grammar", 0.0
    if hasattr(processor, "stage"):          # a stage of llama.cpp's chain (engine.sampler_order)
        return processor.stage
    return type(processor).__name__, float("nan")


def staged_scores(processors, input_ids: torch.Tensor, scores: torch.Tensor) -> list:
    """scores: [batch, vocab]. The scores after each processor in turn (the last is the shaped result)."""
    out = []
    current = scores.clone()
    for processor in processors:
        current = processor(input_ids, current.clone())
        out.append(current)
    return out


def stages_record(token_texts, processors, logits: torch.Tensor, staged: list, candidate_ids: list,
                  cut_shown: int = CUT_SHOWN) -> list:
    """logits: [vocab] raw float32 scores; staged: staged_scores(...) for them. One Stage per processor."""
    stages = []
    previous, previous_probs = logits, torch.softmax(logits, dim=-1)
    previous_cut = torch.isneginf(logits)
    ids = torch.tensor(candidate_ids, dtype=torch.long)
    for processor, after in zip(processors, staged):
        after = after[0]
        probs = torch.softmax(after, dim=-1)
        cut = torch.isneginf(after)
        removed = cut & ~previous_cut
        cut_count = int(removed.sum())
        # the best-ranked removed tokens, by the scores the stage received
        listed = torch.topk(previous.masked_fill(~removed, float("-inf")), k=min(cut_shown, cut_count)).indices
        name, value = stage_name(processor)
        top = int(probs.argmax())
        stages.append(Stage(
            name=name, value=value, kept_count=int(cut.numel() - int(cut.sum())), cut_count=cut_count,
            removed_mass=float(previous_probs[removed].sum()), probs=probs[ids].tolist(),
            top_id=top, top_text=token_texts[top], top_prob=float(probs[top]),
            cut=[StageToken(int(i), token_texts[int(i)], float(previous_probs[i])) for i in listed]))
        previous, previous_probs, previous_cut = after, probs, cut
    return stages


@dataclass(frozen=True)
class OrderedChain:
    """One step's sampler chain in one engine's order: its stages, the set it keeps, and which stage dropped
    each token it drops."""
    order: str
    stages: list           # [Stage]
    kept: torch.Tensor     # [V] bool
    staged: list           # [[1, V]] the scores after each stage

    def dropped_by(self, token_id: int) -> str | None:
        """The name of the stage that removed `token_id` (None when the chain keeps it)."""
        for stage, after in zip(self.stages, self.staged):
            if torch.isneginf(after[0, token_id]):
                return stage.name
        return None


def chain_in_order(token_texts, config, context: torch.Tensor, logits: torch.Tensor, candidate_ids: list,
                   order: str) -> OrderedChain:
    """The step's stages, recomputed from its raw logits [V], in `order` ('transformers' or 'llama.cpp')."""
    processors = build_processors(config.replace(sampler_order=order))
    staged = staged_scores(processors, context, logits[None])
    final = staged[-1][0] if staged else logits
    return OrderedChain(order=order, stages=stages_record(token_texts, processors, logits, staged, candidate_ids),
                        kept=~torch.isneginf(final), staged=staged)
