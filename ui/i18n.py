"""Texts per language. Every label lives in assets/texts/<lang>/<section>.json, never in a page.

`t("section.key", **values)` returns the text in the current language, formatted with
`values`. The language is kept in the URL (`?lang=zh`) and in session state.
A test checks that every key exists in every language.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import streamlit as st

from ui.address import address_value

TEXTS = Path(__file__).resolve().parent.parent / "assets" / "texts"
LANGUAGES = {"en": "English", "zh": "中文"}
DEFAULT_LANGUAGE = "en"


def _run_every_page_through_app_py() -> None:
    """Leave Streamlit's old-style multipage mode if this server process started in it.

    Streamlit treats a folder named pages/ as an old-style multipage app until app.py
    calls st.navigation. If the first visitor of a fresh server opens a page address
    (`/interview`), the page file runs on its own: no frame, no presentation switch,
    old page titles, for every later visitor too. Every page imports this module, so on
    its first import switch the mode off and run again, through app.py.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory and st.runtime.exists():
        PagesManager.uses_pages_directory = False
        st.rerun()


_run_every_page_through_app_py()


@lru_cache(maxsize=None)
def texts(lang: str) -> dict:
    """All texts of one language, flattened to 'section.key' -> text."""
    out = {}
    for path in sorted((TEXTS / lang).glob("*.json")):
        section = path.stem
        for key, value in json.loads(path.read_text(encoding="utf-8")).items():
            out[f"{section}.{key}"] = value
    return out


def language() -> str:
    lang = st.session_state.get("lang") or address_value("lang", DEFAULT_LANGUAGE)
    return lang if lang in LANGUAGES else DEFAULT_LANGUAGE


def t(key: str, **values) -> str:
    """The text for `key` in the current language (English if missing, the key itself as a last resort), with
    its nouns agreeing with the counts put in (see singular)."""
    lang = language()
    text = texts(lang).get(key) or texts(DEFAULT_LANGUAGE).get(key) or key
    if not values:
        return text
    variants = {name: texts(lang)[f"{key}__{name}_1"] for name in values if f"{key}__{name}_1" in texts(lang)}
    return singular(text, values, lang, variants).format(**values)


# English nouns that follow a count in the texts, and their singular ("1 tokens kept" reads "1 token kept")
SINGULAR = {"tokens": "token", "answers": "answer", "steps": "step", "beams": "beam", "candidates": "candidate",
            "samples": "sample", "prefixes": "prefix", "rounds": "round", "layers": "layer", "rows": "row",
            "draws": "draw", "positions": "position", "expansions": "expansion", "choices": "choice",
            "bytes": "byte", "times": "time", "nats": "nat", "bits": "bit", "groups": "group", "words": "word"}
_COUNTED = re.compile(r"\{(\w+)(:[^}]*)?\}( [a-z]+)")


def singular(text: str, values: dict, lang: str, variants: dict | None = None) -> str:
    """`text` with each English noun after a count of 1 made singular; `variants`: the text's own wording for a
    count of 1 where more than the noun changes, by the count's name (a key "certified__k_1" for k = 1: "the top
    answer ... is"). Languages without plural forms are left as they are."""
    if lang != "en":
        return text
    ones = {name for name, value in values.items() if _is_one(value)}
    if not ones:
        return text
    for name in sorted(ones):
        if name in (variants or {}):
            text = variants[name]
            break

    def agree(m):
        noun = m.group(3)[1:]
        return m.group(0)[:-len(noun)] + SINGULAR[noun] if m.group(1) in ones and noun in SINGULAR else m.group(0)

    return _COUNTED.sub(agree, text)


def _is_one(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value == 1) or value == "1"
