"""Text a file or a server wrote, inside one of the page's own sentences: a model's or a file's name.

Such a name is anyone's to write. Beside Markdown (figures.labels.for_markdown), it may hold Unicode's
direction controls: U+202E (right-to-left override) in a model's name would lay out the rest of the banner
backwards, the page's own words with it. `isolated` writes every invisible control as its escape (the
same as a terminal shows it) and wraps the name in a first-strong isolate (U+2068 ... U+2069), so even the
right-to-left letters of a real Arabic or Hebrew name run inside the name and leave the sentence alone.
"""
from __future__ import annotations

from engine.safe_text import printable

FSI, PDI = "\u2068", "\u2069"
NAME_CHARS = 300       # of a file's name or a model's name in a message


def isolated(text: str, limit: int = NAME_CHARS) -> str:
    """`text` cut to `limit` characters, each control or direction mark shown as its escape (\\u202e), inside
    an isolate. Not Markdown-safe by itself: pass the sentence, or this, through for_markdown."""
    return FSI + printable(str(text)[:limit]) + PDI
