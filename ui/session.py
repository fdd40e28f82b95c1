"""The one model shared by all sessions, and the shared sidebar settings kept in the URL.

The model is loaded once per process and never mutated, so every browser session can
use it at once; each decode draws from its own seeded torch.Generator. Per-user
results live in st.session_state.
"""
from __future__ import annotations

import math

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
URL_PROMPT_LIMIT = 4000     # characters of prompt kept in the URL (and so in a share link)


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
        value = kind(raw)
    except (TypeError, ValueError):
        return default
    if isinstance(value, float) and not math.isfinite(value):
        return default          # "nan" and "inf" parse as floats, but no setting means them
    return value


def url_number(key: str, default, low, high, kind=None):
    """A numeric setting from session state or the URL, held inside the widget's range [low, high]
    (a hand-edited URL must not crash a widget). kind: int or float, else the default's type."""
    kind = kind or type(default)
    value = url_value(key, default, kind)
    try:
        return min(max(kind(value), low), high)
    except (TypeError, ValueError, OverflowError):
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


DEFAULT_NEW_TOKENS = 24
LIGHT_NEW_TOKENS = 12       # pages that run several decodes open with this length: an answer in seconds on 2 cores


def shared_sidebar(default_new_tokens: int = DEFAULT_NEW_TOKENS) -> SharedSettings:
    """The sidebar every page shares: language, model, prompt, chat switch, seed, length.

    default_new_tokens: the length a page opens with when neither the session nor the URL has one."""
    st.session_state["_errors_shown"] = set()        # a new run: messages may be shown again (keep_or_stop)
    with st.sidebar:
        st.selectbox(t("common.language"), list(LANGUAGES), format_func=LANGUAGES.get, key="lang",
                     index=list(LANGUAGES).index(language()))
        model = st.text_input(t("common.model"), value=url_value("model", ""), key="model",
                              placeholder=DEFAULT_MODEL, help=t("common.model_help"))
        prompt = st.text_area(t("common.prompt"), value=url_value("prompt", DEFAULT_PROMPT), key="prompt", height=90)
        chat = st.toggle(t("common.chat"), value=url_value("chat", False, bool), key="chat", help=t("common.chat_help"))
        seed = st.number_input(t("common.seed"), min_value=0, max_value=2**31 - 1, step=1,
                               value=url_number("seed", 0, 0, 2**31 - 1), key="seed")
        max_new = st.number_input(t("common.max_new_tokens"), min_value=1, max_value=1024, step=1,
                                  value=url_number("max_new_tokens", default_new_tokens, 1, 1024), key="max_new_tokens")
    settings = SharedSettings(model=model, prompt=prompt, chat=chat, seed=int(seed), max_new_tokens=int(max_new),
                              lang=language())
    sync_url(model=model, chat=chat, seed=settings.seed, max_new_tokens=settings.max_new_tokens, lang=settings.lang)
    if len(prompt) <= URL_PROMPT_LIMIT:
        sync_url(prompt=prompt)
    else:                       # a pasted book does not belong in an address bar or a share link
        st.query_params.pop("prompt", None)
    return settings


# ---- sidebar extras: model facts and a link to this exact view ---------------------
def _human(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}".replace(".0", "")
    return str(int(n))


def model_facts_panel(facts) -> None:
    """Name, parameters, vocabulary, layers and KV bytes per token of the loaded model (ModelFacts or dict)."""
    get = (lambda k: facts.get(k)) if isinstance(facts, dict) else (lambda k: getattr(facts, k, None))
    kv = get("kv_bytes_per_token")
    with st.sidebar.expander(t("common.model_facts"), expanded=False):
        st.markdown(t("common.model_facts_body", name=str(get("name")).replace("|", "\\|"),
                      parameters=_human(get("parameters") or 0), vocab=f"{get('vocab_size') or 0:,}",
                      layers=get("layers"), kv=f"{kv or 0:,}", kv_k=f"{(kv or 0) / 1024:.1f}"))


def share_link() -> str:
    """The address of this page with every setting in its query string."""
    from urllib.parse import urlencode, urlsplit, urlunsplit

    try:
        base = st.context.url or ""
    except Exception:   # noqa: BLE001 - no browser (tests, bare mode)
        base = ""
    parts = urlsplit(base)
    query = urlencode(st.query_params.to_dict())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, "")) if base else "?" + query


def copy_link_control() -> None:
    """A "copy link" box in the sidebar: the code block has Streamlit's copy button."""
    with st.sidebar.popover(t("common.copy_link"), icon="🔗", width="stretch"):
        st.caption(t("common.copy_link_help"))
        prompt = st.session_state.get("prompt") or ""
        if len(prompt) > URL_PROMPT_LIMIT:
            st.warning(t("common.copy_link_no_prompt", n=f"{len(prompt):,}", limit=f"{URL_PROMPT_LIMIT:,}"))
        st.code(share_link(), language=None, wrap_lines=True)


def keep_or_stop(exc: Exception, have_previous: bool) -> None:
    """Say what was wrong; keep the results already on screen when there are some, else stop the page.

    A bad prompt or setting must not wipe out the decode a user was looking at. Each message
    is shown once per run, however many computations it stopped."""
    shown = st.session_state.setdefault("_errors_shown", set())      # emptied by shared_sidebar each run
    if str(exc) not in shown:
        st.error(str(exc))
        shown.add(str(exc))
    if not have_previous:
        st.stop()
    if "kept" not in shown:
        st.caption(t("common.kept_previous"))
        shown.add("kept")


def cached(name: str, identity: tuple, compute):
    """Per-user result in session state, recomputed only when its inputs change.

    When the new inputs are bad (a DecodeScopeError), the message is shown and the previous
    result is returned, so what was on screen stays; with no previous result the page stops."""
    state = st.session_state
    if state.get(name + "_id") != identity:
        try:
            value = compute()
        except DecodeScopeError as exc:
            keep_or_stop(exc, name in state)
            return state[name]
        state[name] = value
        state[name + "_id"] = identity
    return state[name]
