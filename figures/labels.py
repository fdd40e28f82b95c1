"""Token text made visible and safe: spaces and newlines shown, markup never interpreted.

Plotly renders a small HTML subset inside labels and hovers (<b>, <br>, <a>...), and
Markdown renders $math$, *emphasis* and raw HTML. Token texts such as `<b>`, `&amp;`
or `$x$` must appear literally, so every token text goes through these functions.
"""
from __future__ import annotations

import html
import re

SPACE = "␣"
NEWLINE = "⏎"
TAB = "⇥"


def visible(text: str) -> str:
    """Make whitespace visible: ' ' -> ␣, newline -> ⏎, tab -> ⇥; empty -> ∅."""
    if text == "":
        return "∅"
    return text.replace(" ", SPACE).replace("\r\n", NEWLINE).replace("\n", NEWLINE).replace("\r", NEWLINE).replace("\t", TAB)


def for_plotly(text: str) -> str:
    """Safe inside Plotly text, tick labels and hovertemplates (HTML-escaped, whitespace visible)."""
    return html.escape(visible(text), quote=False).replace("%{", "%&#123;")


def for_html(text: str) -> str:
    """Safe inside HTML we build ourselves (attributes included)."""
    return html.escape(text, quote=True)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|$<>&~:])")


def for_markdown(text: str) -> str:
    """Safe inside st.markdown / captions: every Markdown and HTML special character escaped.

    ':' too, for Streamlit's :emoji: and :material/icon: codes. A bare http://... still becomes
    a clickable link (Streamlit links addresses after escapes are read), but it shows as
    written and nothing is fetched."""
    return _MD_SPECIAL.sub(r"\\\1", text)
