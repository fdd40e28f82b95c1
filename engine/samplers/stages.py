"""The sampler one stage at a time: the distribution after each stage of the chain.

`generate` applies its processors in a fixed order (engine.samplers.shaping builds them in that order; llama.cpp's
and vLLM's chains are in sampler_order.py). Applying them one by one gives the same final scores as
applying the list, and shows what each one did: which tokens it removed, how much probability they held,
the renormalised rest, and, for a stage that carries state or draws (mirostat's μ, XTC's draw, DRY's run,
the dynamic temperature, the penalties' window), that state at the step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import (
    EpsilonLogitsWarper,
    EtaLogitsWarper,
    MinPLogitsWarper,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopHLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from engine.samplers.chain import prepare
from engine.config import WARPED_STRATEGIES, DecodeConfig
from engine.grammar.constrain import GrammarMask
from engine.samplers.order import replaced_by_mirostat
from engine.samplers.order import skipped as skipped_settings
from engine.samplers.shaping import build_processors
from engine.trace import Stage, StageToken

CUT_SHOWN = 20     # removed tokens kept per stage, best ranked first


def stage_name(processor) -> tuple:
    """(name, setting) of one processor built by engine.samplers.shaping.build_processors."""
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
    if isinstance(processor, NoRepeatNGramLogitsProcessor):
        return "no_repeat_ngram", float(processor.ngram_size)
    if isinstance(processor, TopHLogitsWarper):
        return "top_h", float(processor.top_h)
    if isinstance(processor, TypicalLogitsWarper):
        return "typical_p", float(processor.mass)
    if isinstance(processor, EpsilonLogitsWarper):
        return "epsilon", float(processor.epsilon)
    if isinstance(processor, EtaLogitsWarper):
        return "eta", float(processor.epsilon)
    if isinstance(processor, GrammarMask):
        return "grammar", 0.0
    if hasattr(processor, "stage"):          # a stage of llama.cpp's or vLLM's chain (engine.samplers.order)
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


def stage_state(processor, chosen: int | None = None) -> dict:
    """The state a stage had at the step it last shaped ({} for a stateless one); `chosen`: the token drawn."""
    if hasattr(processor, "state"):
        return processor.state(chosen)
    return {}


def stages_record(token_texts, processors, logits: torch.Tensor, staged: list, candidate_ids: list,
                  cut_shown: int = CUT_SHOWN, chosen: int | None = None) -> list:
    """logits: [vocab] raw float32 scores; staged: staged_scores(...) for them. One Stage per processor.
    chosen: the token drawn at this step, when known (mirostat's next μ depends on it)."""
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
            cut=[StageToken(int(i), token_texts[int(i)], float(previous_probs[i])) for i in listed],
            state=stage_state(processor, chosen)))
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
    skipped: list = field(default_factory=list)   # settings that are on but have no stage in this order
    replaced: list = field(default_factory=list)  # settings this order has, left out because mirostat replaced them

    def dropped_by(self, token_id: int) -> str | None:
        """The name of the stage that removed `token_id` (None when the chain keeps it)."""
        for stage, after in zip(self.stages, self.staged):
            if torch.isneginf(after[0, token_id]):
                return stage.name
        return None


def chain_in_order(token_texts, config, context: torch.Tensor, logits: torch.Tensor, candidate_ids: list,
                   order: str, prompt_length: int | None = None, mu: float | None = None,
                   tokenize=None) -> OrderedChain:
    """The step's stages, recomputed from its raw logits [V], in `order` ('transformers', 'llama.cpp' or
    'vllm'). Settings the order lacks are skipped (listed in `skipped`), not refused. context: [1, n] the
    prompt and the tokens before the step; prompt_length: how many of them are the prompt (vLLM's frequency
    and presence count the rest; without it, all of them); mu: mirostat's μ at the step, as the decode
    recorded it (without it, μ is the one this process learnt for the context, or its start, 2τ); tokenize:
    the model's text -> token ids, for DRY's breakers split over tokens (without it, only whole ones)."""
    in_order = config.replace(sampler_order=order)
    processors = build_processors(in_order)
    prepare(processors, prompt_length=prompt_length, token_texts=token_texts, tokenize=tokenize)
    if mu is not None:
        for processor in processors:
            if hasattr(processor, "mu_by_context"):
                processor.mu_by_context[processor.key(context[0].tolist())] = float(mu)
    staged = staged_scores(processors, context, logits[None])
    final = staged[-1][0] if staged else logits
    replaced = replaced_by_mirostat(in_order)
    skipped = [name for name in skipped_settings(in_order, [stage_name(p)[0] for p in processors])
               if name not in replaced]
    return OrderedChain(order=order, stages=stages_record(token_texts, processors, logits, staged, candidate_ids),
                        kept=~torch.isneginf(final), staged=staged, skipped=skipped, replaced=replaced)


LABELS = {"repetition_penalty": "repetition penalty", "no_repeat_ngram": "no-repeat n-gram", "penalties": "penalties",
          "dry": "DRY", "temperature": "temperature", "top_h": "top-h", "top_n_sigma": "top-nσ", "top_k": "top-k",
          "typical_p": "typical-p", "top_p": "top-p", "min_p": "min-p", "xtc": "XTC threshold", "epsilon": "ε-cutoff",
          "eta": "η-cutoff", "mirostat": "mirostat τ"}


def describe(config: DecodeConfig) -> str:
    """One line naming the shaping in force, stage by stage in its chain's order, for captions and the CLI."""
    parts = []
    for processor in build_processors(config):
        name, value = stage_name(processor)
        part = f"{LABELS.get(name, name)} {value:g}"
        if name == "penalties":
            part = (f"penalties (repeat {config.repetition_penalty:g}, frequency {config.frequency_penalty:g}, "
                    f"presence {config.presence_penalty:g}")
            if config.sampler_order == "llama.cpp":
                part += ", the whole context" if config.penalty_last_n < 0 else f", last {config.penalty_last_n}"
            part += ")"
        elif name == "temperature" and getattr(processor, "range", 0) > 0:
            part += f" ± {config.dynatemp_range:g} (dynamic)"
        elif name == "xtc":
            part += f" (chance {config.xtc_probability:g})"
        elif name == "mirostat":
            part = f"mirostat v{config.mirostat} (τ {config.mirostat_tau:g}, η {config.mirostat_eta:g})"
        parts.append(part)
    if config.sampler_order != "transformers" and config.strategy in WARPED_STRATEGIES and parts:
        parts.append(f"in {config.sampler_order}'s order")
    return ", ".join(parts) or "no shaping"
