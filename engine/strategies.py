"""Which runner decodes which strategy: the one place that maps a config to its loop."""
from __future__ import annotations

from engine.decoding.beam import BeamSearch
from .config import SOFT_INPUT_STRATEGIES, DecodeConfig
from engine.decoding.decoder import Decoder
from .errors import ConfigError
from .model import LoadedModel
from engine.decoding.runner import Runner
from .soft_inputs.decoder import SoftInputDecoder
from .speculative import SpeculativeDecoder
from .trace import Trace


def make_runner(lm: LoadedModel, prompt: str, config: DecodeConfig, forced: dict | None = None,
                draft_lm: LoadedModel | None = None) -> Runner:
    """A runner for `config`, ready to step: BeamSearch for beam, SpeculativeDecoder for speculative (draft_lm:
    the draft model of a 'model:NAME' draft), SoftInputDecoder for the feed-back rules of engine.soft_inputs,
    Decoder for everything else.
    `forced` (step index -> token id) makes a branch; beam search has no single choice to force."""
    if config.strategy == "speculative":
        if forced:
            raise ConfigError("forced", "forced: speculative decoding cannot force a token; use greedy or sample")
        return SpeculativeDecoder(lm, prompt, config, draft_lm)
    if config.strategy == "beam":
        if forced:
            raise ConfigError("forced", "forced: beam search cannot force a token; use greedy or sample to branch")
        return BeamSearch(lm, prompt, config)
    if config.strategy in SOFT_INPUT_STRATEGIES:
        return SoftInputDecoder(lm, prompt, config, forced=forced)
    return Decoder(lm, prompt, config, forced=forced)


def decode(lm: LoadedModel, prompt: str, config: DecodeConfig, forced: dict | None = None,
           draft_lm: LoadedModel | None = None) -> Trace:
    """Decode `prompt` with `config` to the end and return the full Trace."""
    return make_runner(lm, prompt, config, forced, draft_lm).run()
