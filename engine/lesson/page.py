"""The lesson file: one HTML page that holds its data, its styles, its scripts and plotly.js, and asks for nothing.

Opened from disk (file://) or any static host: classic inline scripts only (module scripts and fetch do not work
from disk), a Content Security Policy that forbids every request (default-src 'none'), and the data in a
<script type="application/json"> with every '</' escaped, so no text of the trace can close the tag.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .bundle import lesson_bundle
from .view import lesson_view

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
LANGUAGES = ("en", "zh")
MARKER = re.compile(r"/\*(STYLE|DATA|PLOTLY|SCRIPT)\*/")


def lesson_texts() -> dict:
    """The page's strings in every language (assets/texts/<lang>/lesson.json, as the app keeps its own)."""
    return {lang: json.loads((ASSETS / "texts" / lang / "lesson.json").read_text(encoding="utf-8"))
            for lang in LANGUAGES}


def script_json(value) -> str:
    """JSON that is safe inside a <script> element: every '</' written '<\\/' and every '<!--' '\\u003c!--', the
    only sequences that end a script's text or change how it is read, so '</script>' in a token's text stays
    text. (Every '<' as \\u003c would cost 6 bytes for each byte piece such as <0xE4>.) JSON has '<' only
    inside strings, where '\\/' and '\\u003c' read back as '/' and '<'."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<!--", "\\u003c!--").replace("</", "<\\/")


def script_text(code: str) -> str:
    """Code for an inline classic script: a '</script' inside it (in a string) would end the element."""
    return re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE)


def lesson_html(trace, lang: str = "en", title: str = "", notes: dict | None = None) -> str:
    """The lesson file's text for a checked Trace: the chosen language first (the page switches), the
    teacher's title and notes ({"<step from 1>": note}) beside the steps."""
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}")
    bundle, name = lesson_bundle()
    build, version = re.match(r"plotly-(\w+)-(.+)\.min\.js", name).groups()
    data = {"lang": lang, "title": title, "notes": notes or {}, "texts": lesson_texts(),
            "bundle": {"build": build, "version": version}, "view": lesson_view(trace)}
    parts = {"STYLE": (ASSETS / "lesson" / "lesson.css").read_text(encoding="utf-8"),
             "DATA": script_json(data), "PLOTLY": script_text(bundle),
             "SCRIPT": script_text((ASSETS / "lesson" / "lesson.js").read_text(encoding="utf-8"))}
    template = (ASSETS / "lesson" / "lesson.html").read_text(encoding="utf-8")
    return MARKER.sub(lambda m: parts[m.group(1)], template)       # one pass: no part is read for markers
