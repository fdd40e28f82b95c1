"""Text from outside (a server, a file, an argument) made safe to show and to write: control characters
made visible, so none can drive a terminal, and lone surrogates replaced, which UTF-8 cannot hold."""
from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with every lone surrogate (JSON can carry one as an escape) replaced by U+FFFD. A str holds
    a pair as one character, so every surrogate left in it is alone."""
    return _SURROGATE.sub("\ufffd", text)


def printable(text) -> str:
    """`text` with every character that is not printable (escapes, other controls, bidi overrides, lone
    surrogates) written as its escape, e.g. \\x1b; the same in a terminal and on a page."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
