"""Errors a user can cause and fix: each carries one sentence that names what was wrong."""


class DecodeScopeError(Exception):
    """Base class: the message is meant to be shown to a person as it is."""


class ConfigError(DecodeScopeError, ValueError):
    """A decoding parameter or the prompt is out of range; `param` names it."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


class ModelLoadError(DecodeScopeError):
    """A model could not be loaded (unknown, unreachable, not a causal LM, out of memory)."""


class TraceFormatError(DecodeScopeError, ValueError):
    """A trace file is not valid DecodeScope trace JSON."""
