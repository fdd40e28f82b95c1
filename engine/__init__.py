"""DecodeScope engine: load a causal LM, decode while recording every step, and read traces.

Plain Python and PyTorch; no UI code, so it works from a notebook or the command line.
"""
from .config import FEEDBACK_STRATEGIES, STRATEGIES, WARPED_STRATEGIES, DecodeConfig
from .errors import ConfigError, DecodeScopeError, ModelLoadError, TraceFormatError
from .model import DEFAULT_MODEL, LoadedModel, ModelFacts, load_model
from .trace import SCHEMA, Candidate, FeedBack, KVStep, Neighbour, Node, Sequence, Stage, StageToken, Step, Trace
from .strategies import decode, make_runner

__all__ = ["STRATEGIES", "WARPED_STRATEGIES", "FEEDBACK_STRATEGIES", "make_runner", "DecodeConfig", "ConfigError",
           "DecodeScopeError", "ModelLoadError", "TraceFormatError",
           "DEFAULT_MODEL", "LoadedModel", "ModelFacts", "load_model", "SCHEMA", "Candidate", "FeedBack", "KVStep",
           "Neighbour", "Node", "Sequence", "Stage", "StageToken", "Step", "Trace", "decode"]
