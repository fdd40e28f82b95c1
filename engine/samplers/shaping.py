"""Shape the next-token distribution with transformers' own logits processors (or another engine's chain).

The processors are built in the order `generate` applies them (GenerationMixin._get_logits_processor):
the processors that read the history first (repetition penalty, no-repeat n-gram), then a user's processor
(the grammar, inserted by the runner), then, for sampling-type strategies only, the warpers: temperature →
top-h → top-k → top-p → min-p → typical → ε → η. llama.cpp's and vLLM's chains are in sampler_order.py.
Choosing a token is a separate step (see decoder.py and beam.py); this module only shapes.
"""
from __future__ import annotations

import torch
from transformers import (
    EpsilonLogitsWarper,
    EtaLogitsWarper,
    LogitsProcessorList,
    MinPLogitsWarper,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopHLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from engine.config import DecodeConfig
from engine.samplers.order import llama_cpp_processors, vllm_processors


def build_processors(config: DecodeConfig) -> LogitsProcessorList:
    """The processor list `generate` would build for these settings (or llama.cpp's or vLLM's chain, when the
    config asks for its order). Settings the order's engine lacks build no stage."""
    if config.sampler_order == "llama.cpp":
        return llama_cpp_processors(config)
    if config.sampler_order == "vllm":
        return vllm_processors(config)
    processors = LogitsProcessorList()
    if config.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(config.repetition_penalty))
    if config.no_repeat_ngram_size > 0:
        processors.append(NoRepeatNGramLogitsProcessor(config.no_repeat_ngram_size))
    if config.warped:
        if config.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(config.temperature))
        if config.top_h > 0.0:
            processors.append(TopHLogitsWarper(top_h=config.top_h))
        if config.top_k != 0:
            processors.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
        if config.top_p < 1.0:
            processors.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
        if config.min_p > 0.0:
            processors.append(MinPLogitsWarper(min_p=config.min_p, min_tokens_to_keep=1))
        if config.typical_p < 1.0:
            processors.append(TypicalLogitsWarper(mass=config.typical_p, min_tokens_to_keep=1))
        if 0.0 < config.epsilon_cutoff < 1.0:
            processors.append(EpsilonLogitsWarper(epsilon=config.epsilon_cutoff, min_tokens_to_keep=1))
        if 0.0 < config.eta_cutoff < 1.0:
            processors.append(EtaLogitsWarper(epsilon=config.eta_cutoff, min_tokens_to_keep=1))
    return processors


def shape(processors: LogitsProcessorList, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """scores: [batch, vocab] -> shaped scores, -inf where a token was cut. Input is not modified."""
    return processors(input_ids, scores.clone())


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy in nats over the last dim; 0 * log 0 counts as 0."""
    return torch.special.entr(probs).sum(-1)      # entr(x) = -x ln x, and 0 at x = 0: one pass


def varentropy(probs: torch.Tensor) -> torch.Tensor:
    """Varentropy in nats^2 over the last dim: Var[-log p] = sum p (log p + H)^2; tokens of probability 0 add
    nothing. A 50/50 tie has 0; [0.9, 0.1] has 0.434 (0.904 bits^2)."""
    logp = torch.where(probs > 0, probs.clamp_min(1e-45).log(), torch.zeros_like(probs))
    h = entropy(probs)
    return (probs * (logp + h.unsqueeze(-1)) ** 2).sum(-1)
