"""DecodeScope engine: load a causal LM, decode while recording every step, and read traces.

Plain Python and PyTorch; no UI code, so it works from a notebook or the command line.

The names below load on first use (PEP 562): `python -m engine` with a bad argument answers before
PyTorch and transformers are imported (a second or more), and `import engine.config` stays light.
"""
from __future__ import annotations

import importlib

_HOMES = {
    ".config": ("STRATEGIES", "WARPED_STRATEGIES", "FEEDBACK_STRATEGIES", "DecodeConfig"),
    ".errors": ("ConfigError", "DecodeScopeError", "ModelLoadError", "TraceFormatError"),
    ".model": ("DEFAULT_MODEL", "LoadedModel", "ModelFacts", "load_model"),
    ".trace": ("SCHEMA", "Candidate", "FeedBack", "KVStep", "Neighbour", "Node", "Sequence", "Stage", "StageToken",
               "Step", "Trace"),
    ".strategies": ("decode", "make_runner"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = list(_HOME_OF)


def __getattr__(name: str):
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value          # later lookups skip this function
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
