"""DecodeScope engine: load a causal LM, decode while recording every step, and read traces.

Plain Python and PyTorch; no UI code, so it works from a notebook or the command line.
"""
from .config import STRATEGIES, DecodeConfig
from .errors import ConfigError, DecodeScopeError, ModelLoadError, TraceFormatError
from .model import DEFAULT_MODEL, LoadedModel, ModelFacts, load_model
from .trace import SCHEMA, Candidate, FeedBack, KVStep, Neighbour, Node, Sequence, Stage, StageToken, Step, Trace

# Imported eagerly so `engine.decode` stays the function (a lazy submodule import would rebind it to the module).
from .decode import decode  # noqa: E402


__all__ = ["STRATEGIES", "DecodeConfig", "ConfigError", "DecodeScopeError", "ModelLoadError", "TraceFormatError",
           "DEFAULT_MODEL", "LoadedModel", "ModelFacts", "load_model", "SCHEMA", "Candidate", "FeedBack", "KVStep",
           "Neighbour", "Node", "Sequence", "Stage", "StageToken", "Step", "Trace", "decode"]
