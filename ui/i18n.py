"""Texts per language. Every label lives in assets/texts/<lang>/<section>.json, never in a page.

`t("section.key", **values)` returns the text in the current language, formatted with
`values`. The language is kept in the URL (`?lang=zh`) and in session state.
A test checks that every key exists in every language.
"""
from __future__ import annotations

import json
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
    """The text for `key` in the current language (English if missing, the key itself as a last resort)."""
    text = texts(language()).get(key) or texts(DEFAULT_LANGUAGE).get(key) or key
    return text.format(**values) if values else text
