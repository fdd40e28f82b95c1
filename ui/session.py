"""The one model shared by all sessions, and the shared sidebar settings kept in the URL.

The model is loaded once per process and never mutated, so every browser session can
use it at once; each decode draws from its own seeded torch.Generator. Per-user
results live in st.session_state.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import streamlit as st

from engine import DEFAULT_MODEL, DecodeScopeError, load_model
from ui.i18n import LANGUAGES, language, t

_load_lock = threading.Lock()


@st.cache_resource(show_spinner=False)
def _models() -> dict:
    """name -> LoadedModel, one dict per server process."""
    return {}


def get_lm(name: str = ""):
    """The loaded model, or None after showing a clear error. Shows a progress bar on the first load."""
    key = name.strip() or DEFAULT_MODEL
    models = _models()
    if key in models:
        return models[key]
    with _load_lock:
        if key not in models:
            bar = st.progress(0.0, text=t("common.loading_model", name=key))
            try:
                lm = load_model(None if key == DEFAULT_MODEL else key,
                                progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=msg))
            except DecodeScopeError as exc:
                bar.empty()
                st.error(t("common.model_error", error=str(exc)))
                return None
            bar.empty()
            for other in [k for k in models if k != DEFAULT_MODEL]:
                del models[other]          # keep the default plus at most one user model in memory
            models[key] = lm
    return models[key]


# ---- settings kept in the URL --------------------------------------------------
def url_value(key: str, default, kind=str):
    """A setting from session state, else the URL, else the default (bad URL values fall back)."""
    if key in st.session_state:
        return st.session_state[key]
    raw = st.query_params.get(key)
    if raw is None:
        return default
    try:
        if kind is bool:
            return raw in ("1", "true", "True")
        return kind(raw)
    except (TypeError, ValueError):
        return default


def sync_url(**values) -> None:
    """Write settings into the URL so a copied address reproduces the view."""
    for key, value in values.items():
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        if st.query_params.get(key) != text:
            st.query_params[key] = text


@dataclass(frozen=True)
class SharedSettings:
    model: str
    prompt: str
    chat: bool
    seed: int
    max_new_tokens: int
    lang: str


DEFAULT_PROMPT = "The capital of France is"


def shared_sidebar() -> SharedSettings:
    """The sidebar every page shares: language, model, prompt, chat switch, seed, length."""
    with st.sidebar:
        st.selectbox(t("common.language"), list(LANGUAGES), format_func=LANGUAGES.get, key="lang",
                     index=list(LANGUAGES).index(language()))
        model = st.text_input(t("common.model"), value=url_value("model", ""), key="model",
                              placeholder=DEFAULT_MODEL, help=t("common.model_help"))
        prompt = st.text_area(t("common.prompt"), value=url_value("prompt", DEFAULT_PROMPT), key="prompt", height=90)
        chat = st.toggle(t("common.chat"), value=url_value("chat", False, bool), key="chat", help=t("common.chat_help"))
        seed = st.number_input(t("common.seed"), min_value=0, max_value=2**31 - 1, step=1,
                               value=url_value("seed", 0, int), key="seed")
        max_new = st.number_input(t("common.max_new_tokens"), min_value=1, max_value=1024, step=1,
                                  value=url_value("max_new_tokens", 24, int), key="max_new_tokens")
    settings = SharedSettings(model=model, prompt=prompt, chat=chat, seed=int(seed), max_new_tokens=int(max_new),
                              lang=language())
    sync_url(model=model, prompt=prompt, chat=chat, seed=settings.seed, max_new_tokens=settings.max_new_tokens,
             lang=settings.lang)
    return settings
