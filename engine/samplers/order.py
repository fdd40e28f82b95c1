"""The sampler chain in another engine's order and by its rules: llama.cpp's and vLLM's.

transformers applies temperature → top-k → top-p → min-p → … (engine.samplers.shaping); llama.cpp's default chain
(common_params_sampling::samplers in llama.cpp main) applies penalties → DRY → top-n-σ → top-k → typical →
top-p → min-p → XTC → temperature, and vLLM's V1 sampler penalties → temperature → min-p → top-k / top-p.
Top-k does not care where the temperature comes, but top-p and min-p do: at a temperature above 1,
transformers' min-p sees a flatter distribution and keeps tokens that llama.cpp's min-p, at temperature 1,
has already dropped (and the other way round below 1). So the same settings can sample from different
sets, and "a token sampled despite min-p" in one engine is what another engine's order would never allow.
The same name also follows different rules (see llama_stages and vllm_stages): which tokens a penalty
counts, whether top-k keeps ties.

llama.cpp's `--samplers` list (config.samplers) replaces its default order; mirostat replaces the whole chain
with temperature → mirostat, dropping the penalties too, as common_sampler_init does. Grammar is outside
llama.cpp's chain; here it comes after the penalties, as in the other orders.

llama-cpp-python 0.3.36 (what the served tests run) builds its own chain (llama_cpp/llama.py,
`Llama._init_sampler`): penalties (window `last_n_tokens_size`, 64) → grammar → top-k → typical-p → top-p →
min-p → temperature (plain, never dynamic) → draw, each truncation keeping at least 1 token; no DRY, top-n-σ
or XTC stage; with mirostat, penalties → grammar → mirostat, with no temperature before it. For the settings
it has and without mirostat, the stages are in the same order as llama.cpp main's.

Only the stages whose setting is on are built (a stage at its neutral value changes nothing). Strategies that
do not sample (greedy, beam) get the stages that read the history (penalties, DRY) and no truncation, as
transformers' `generate` gives them its processors and not its warpers; vLLM's greedy takes the argmax
after its penalties too.
"""
from __future__ import annotations

import dataclasses

import torch
from transformers import LogitsProcessorList

from engine.samplers import llama as ll
from engine.samplers import vllm as vl
from engine.config import SAMPLER_ORDERS, DecodeConfig, dry_breakers

ORDERS = SAMPLER_ORDERS
HISTORY_STAGES = ("repetition_penalty", "no_repeat_ngram", "penalties", "dry")   # read the context, not chance
LLAMA_CPP_DEFAULT = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")
# each setting and the stage that applies it (a setting left at its neutral value builds no stage)
SETTING_STAGES = {
    "repetition_penalty": ("repetition_penalty", "penalties"), "presence_penalty": ("penalties",),
    "frequency_penalty": ("penalties",), "no_repeat_ngram_size": ("no_repeat_ngram",), "dry_multiplier": ("dry",),
    "temperature": ("temperature",), "dynatemp_range": ("temperature",), "top_h": ("top_h",),
    "top_n_sigma": ("top_n_sigma",), "top_k": ("top_k",), "typical_p": ("typical_p",), "top_p": ("top_p",),
    "min_p": ("min_p",), "xtc_probability": ("xtc",), "epsilon_cutoff": ("epsilon",), "eta_cutoff": ("eta",),
    "mirostat": ("mirostat",),
}


def llama_cpp_names(config: DecodeConfig) -> list:
    """The llama.cpp sampler names of the chain, in order (its --samplers list, or the default)."""
    if config.samplers:
        return [name.strip() for name in config.samplers.split(";") if name.strip()]
    return list(LLAMA_CPP_DEFAULT)


def llama_cpp_processors(config: DecodeConfig) -> LogitsProcessorList:
    """llama.cpp's chain for these settings: each listed sampler whose setting is on, in the list's order."""
    processors = LogitsProcessorList()
    sampling = config.warped
    if config.mirostat and sampling:
        if config.temperature != 1.0:
            processors.append(ll.Temperature(config.temperature))
        processors.append(ll.Mirostat(config.mirostat, config.mirostat_tau, config.mirostat_eta))
        return processors
    for name in llama_cpp_names(config):
        stage = _llama_cpp_stage(name, config)
        if stage is not None and (sampling or stage.stage[0] in HISTORY_STAGES):
            processors.append(stage)
    return processors


def _llama_cpp_stage(name: str, c: DecodeConfig):
    """One of llama.cpp's samplers, built when its setting is on; None when it would change nothing."""
    if name == "penalties":
        on = c.repetition_penalty != 1.0 or c.frequency_penalty != 0.0 or c.presence_penalty != 0.0
        if on and c.penalty_last_n != 0:
            return ll.Penalties(c.repetition_penalty, c.frequency_penalty, c.presence_penalty, c.penalty_last_n)
    elif name == "dry":
        if c.dry_multiplier > 0 and c.dry_penalty_last_n != 0:
            return ll.Dry(c.dry_multiplier, c.dry_base, c.dry_allowed_length, c.dry_penalty_last_n,
                          dry_breakers(c.dry_sequence_breakers) or [])
    elif name == "top_n_sigma" and c.top_n_sigma > 0:
        return ll.TopNSigma(c.top_n_sigma)
    elif name == "top_k" and c.top_k > 0:
        return ll.TopK(c.top_k)
    elif name == "typ_p" and c.typical_p < 1.0:
        return ll.Typical(c.typical_p)
    elif name == "top_p" and c.top_p < 1.0:
        return ll.TopP(c.top_p)
    elif name == "min_p" and c.min_p > 0.0:
        return ll.MinP(c.min_p)
    elif name == "xtc" and c.xtc_probability > 0.0:
        return ll.Xtc(c.xtc_probability, c.xtc_threshold, c.seed)
    elif name == "temperature" and (c.temperature != 1.0 or c.dynatemp_range > 0):
        return ll.Temperature(c.temperature, c.dynatemp_range, c.dynatemp_exponent)
    return None


def vllm_processors(config: DecodeConfig) -> LogitsProcessorList:
    """vLLM's chain: penalties → temperature → min-p → top-k → top-p, each stage only when its setting is on."""
    processors = LogitsProcessorList()
    c = config
    if c.repetition_penalty != 1.0 or c.frequency_penalty != 0.0 or c.presence_penalty != 0.0:
        processors.append(vl.Penalties(c.repetition_penalty, c.frequency_penalty, c.presence_penalty))
    if c.warped:
        if c.temperature != 1.0:
            processors.append(vl.Temperature(c.temperature))
        if c.min_p > 0.0:
            processors.append(vl.MinP(c.min_p))
        if c.top_k > 0:
            processors.append(vl.TopK(c.top_k))
        if c.top_p < 1.0:
            processors.append(vl.TopP(c.top_p))
    return processors


def skipped(config: DecodeConfig, names: list) -> list:
    """The settings that are on but have no stage among `names` (the stage names of a built chain): those
    the order's engine lacks, those its --samplers list leaves out, those mirostat replaces."""
    neutral = DecodeConfig()
    out = []
    for setting, stages in SETTING_STAGES.items():
        if getattr(config, setting) != getattr(neutral, setting) and not set(stages) & set(names):
            out.append(setting)
    if config.samplers and config.sampler_order != "llama.cpp":
        out.append("samplers")
    return out


def replaced_by_mirostat(config: DecodeConfig) -> list:
    """The settings that are on and that llama.cpp's chain would apply, but that its mirostat chain (temperature
    → mirostat) replaces: in llama.cpp's order, sampling with mirostat on. [] otherwise. These did not run
    because mirostat took the chain's place, not because llama.cpp lacks them."""
    if not (config.mirostat and config.warped and config.sampler_order == "llama.cpp"):
        return []
    without = llama_cpp_processors(dataclasses.replace(config, mirostat=0))
    would_run = {p.stage[0] for p in without}
    out = [setting for setting in skipped(config, ["temperature", "mirostat"])
           if setting != "mirostat" and set(SETTING_STAGES[setting]) & would_run]
    if config.dynatemp_range > 0:          # the chain's temperature is the plain one (llama_sampler_init_temp)
        out.append("dynatemp_range")
    return out


def order_config(config: DecodeConfig, order: str) -> DecodeConfig:
    """The same settings in another order (validation is not run: settings the order lacks are skipped)."""
    return dataclasses.replace(config, sampler_order=order)


def kept(processors, context: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """[V] bool: the tokens a chain leaves, for raw logits [V]."""
    return ~torch.isneginf(processors(context, logits[None].clone())[0])


def disputed(logits: torch.Tensor, kept_a: torch.Tensor, kept_b: torch.Tensor) -> list:
    """Token ids one chain keeps and the other drops, most likely first."""
    differ = (kept_a ^ kept_b).nonzero().flatten()
    return differ[torch.argsort(logits[differ], descending=True)].tolist()
