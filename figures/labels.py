"""Token text made visible and safe: spaces and newlines shown, markup never interpreted.

Plotly renders a small HTML subset inside labels and hovers (<b>, <br>, <a>...), and
Markdown renders $math$, *emphasis* and raw HTML. Token texts such as `<b>`, `&amp;`
or `$x$` must appear literally, so every token text goes through these functions.
"""
from __future__ import annotations

import html
import re
import textwrap
import unicodedata

SPACE = "␣"
NEWLINE = "⏎"
TAB = "⇥"


def visible(text: str) -> str:
    """Make whitespace visible: ' ' -> ␣, newline -> ⏎, tab -> ⇥; empty -> ∅."""
    if text == "":
        return "∅"
    return (text.replace(" ", SPACE).replace("\r\n", NEWLINE).replace("\n", NEWLINE).replace("\r", NEWLINE)
            .replace("\t", TAB))


ZERO_WIDTH_SPACE = "\u200b"


def wrappable(text: str) -> str:
    """Visible text that may still wrap: a line can break after each ␣ and ⏎, which are not spaces to a
    browser (a long hypothesis written with them alone runs out of its cell instead of wrapping)."""
    shown = visible(text) if text else ""
    return shown.replace(SPACE, SPACE + ZERO_WIDTH_SPACE).replace(NEWLINE, NEWLINE + ZERO_WIDTH_SPACE)


def for_plotly(text: str) -> str:
    """Safe inside Plotly text, tick labels and hovertemplates (HTML-escaped, whitespace visible)."""
    return html.escape(visible(text), quote=False).replace("%{", "%&#123;")


def for_html(text: str) -> str:
    """Safe inside HTML we build ourselves (attributes included)."""
    return html.escape(text, quote=True)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|$<>&~:])")


WORD_JOINER = "\u2060"
# GitHub-flavoured Markdown makes a link of a bare http://host.name, www.host.name or user@host.name,
# even after every special character is escaped; an invisible word joiner before '://', 'www.'s dot
# and '@' keeps such text plain
_AUTOLINK = re.compile(r"(?i)(://|(?<=www)\.|@)")


def for_markdown(text: str) -> str:
    """Safe inside st.markdown / captions: every Markdown and HTML special character escaped,
    and no bare address turned into a link."""
    return _MD_SPECIAL.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER + r"\1", text))


def duration(seconds: float) -> str:
    """A measured time in the unit that reads best: µs below a millisecond, else ms, else s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds:,.2f} s"


def one_line(text: str) -> str:
    """Generated text for one Markdown line: newlines shown as ⏎, Markdown characters escaped."""
    return for_markdown(text.replace("\r\n", "\n").replace("\n", f" {NEWLINE} "))


def code(text) -> str:
    """`text` as an inline code span on one line (a code span shows its text literally)."""
    flat = " ".join(str(text).split()).replace("`", "'")
    return f"`{flat}`" if flat else "∅"


def display_width(text: str) -> int:
    """Columns a text takes: a Chinese or other wide character takes two."""
    return sum(2 if _wide(c) else 1 for c in text)


def wrapped(text: str, width: int) -> list:
    """Lines of at most `width` columns. Words are kept whole; wide characters (Chinese has no spaces to
    break at) count two columns and a line may break between any two of them."""
    if display_width(text) == len(text):
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    lines, line = [], ""
    for unit in _units(text):
        if line and display_width(line + unit) > width:
            lines.append(line.strip())
            line = "" if unit == " " else unit
        else:
            line += unit
    lines.append(line.strip())
    return [x for x in lines if x]


def _units(text: str) -> list:
    """The text as units a line may break between: a space, one wide character, or a run of the others."""
    units, run = [], ""
    for char in text:
        if char == " " or _wide(char):
            if run:
                units.append(run)
            units.append(char)
            run = ""
        else:
            run += char
    return units + ([run] if run else [])


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"
