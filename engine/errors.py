"""Errors a user can cause and fix: each carries one sentence that names what was wrong."""


class DecodeScopeError(Exception):
    """Base class: the message is meant to be shown to a person as it is. `reason` (a short name of what was
    wrong) and `values` (what fills its sentence in) let a page say it in the reader's language instead."""

    def __init__(self, message: str = "", reason: str = "", /, **values):
        super().__init__(message)
        self.reason = reason
        self.values = values


class ConfigError(DecodeScopeError, ValueError):
    """A decoding parameter or the prompt is out of range; `param` names it."""

    def __init__(self, param: str, message: str, reason: str = "", /, **values):
        super().__init__(message, reason, **values)
        self.param = param


class ModelLoadError(DecodeScopeError):
    """A model could not be loaded (unknown, unreachable, not a causal LM, out of memory)."""


class TraceFormatError(DecodeScopeError, ValueError):
    """A trace file is not valid DecodeScope trace JSON."""


QUOTE_CHARS = 40


def quoted(value, limit: int = QUOTE_CHARS) -> str:
    """A value for an error message: its repr, cut to `limit` characters. A value comes from a file or an
    address anyone can write; a message that quoted a 15 MB string whole would be a 15 MB sentence."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def shortened(text: str, limit: int = 300) -> str:
    """A message cut to `limit` characters (it may quote a value somebody else wrote)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
