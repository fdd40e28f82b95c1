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

TEXTS = Path(__file__).resolve().parent.parent / "assets" / "texts"
LANGUAGES = {"en": "English", "zh": "中文"}
DEFAULT_LANGUAGE = "en"


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
    lang = st.session_state.get("lang") or st.query_params.get("lang", DEFAULT_LANGUAGE)
    return lang if lang in LANGUAGES else DEFAULT_LANGUAGE


def t(key: str, **values) -> str:
    """The text for `key` in the current language (English if missing, the key itself as a last resort)."""
    text = texts(language()).get(key) or texts(DEFAULT_LANGUAGE).get(key) or key
    return text.format(**values) if values else text
