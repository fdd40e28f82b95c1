"""DecodeScope engine: load a causal LM, decode while recording every step, and read traces.

Plain Python and PyTorch; no UI code, so it works from a notebook or the command line.
"""
from .config import STRATEGIES, DecodeConfig
from .errors import ConfigError, DecodeScopeError, ModelLoadError, TraceFormatError
from .model import DEFAULT_MODEL, LoadedModel, ModelFacts, load_model
from .trace import SCHEMA, Candidate, FeedBack, KVStep, Neighbour, Node, Sequence, Step, Trace


def decode(lm, prompt, config, forced=None):
    """Decode `prompt` with `config` on `lm`; returns a Trace. See engine.decode."""
    from .decode import decode as _decode

    return _decode(lm, prompt, config, forced=forced)


__all__ = ["STRATEGIES", "DecodeConfig", "ConfigError", "DecodeScopeError", "ModelLoadError", "TraceFormatError",
           "DEFAULT_MODEL", "LoadedModel", "ModelFacts", "load_model", "SCHEMA", "Candidate", "FeedBack", "KVStep",
           "Neighbour", "Node", "Sequence", "Step", "Trace", "decode"]
