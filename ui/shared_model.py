"""The one model shared by all sessions: which models this server offers, and each loaded once per process.

The model is loaded once per process and never mutated, so every browser session can use it at once;
each decode draws from its own seeded torch.Generator. Per-user results live in st.session_state.
"""
from __future__ import annotations

import gc
import os
import threading

import streamlit as st

from engine import DEFAULT_MODEL, DecodeScopeError, ModelLoadError, load_model
from engine.model import LoadedModel, bundled_named
from engine.config import check_model_name
from engine.decoding.stepper import OPENINGS
from figures.labels import for_markdown
from ui.engine_words import engine_text, page_error
from ui.i18n import t
from ui.results import keep_or_stop

_load_lock = threading.Lock()


@st.cache_resource(show_spinner=False)
def _models() -> dict:
    """name -> LoadedModel, one dict per server process."""
    return {}


SERVED = "served"      # the model choice, and the DECODESCOPE_MODELS word, for a model on a server


def _pinned() -> list | None:
    raw = os.environ.get("DECODESCOPE_MODELS", "").strip()
    return [n.strip() for n in raw.split(",") if n.strip()] if raw else None


def offered_models() -> tuple | None:
    """The models this server offers, from DECODESCOPE_MODELS (comma-separated; `bundled` is the
    bundled model, `served` allows models on a vLLM or llama.cpp server), or None when any name may
    be loaded. A shared deployment pins its models so that nobody, and no uploaded file, makes the
    server fetch or load another. A setting that names only `served` offers no local model: ()."""
    pinned = _pinned()
    if pinned is None:
        return None
    names = [_bundled_or(n) for n in pinned if n.lower() != SERVED]
    return tuple(dict.fromkeys(names))


def offers_served() -> bool:
    """Whether users may connect to a model on a server of their choice: always when DECODESCOPE_MODELS
    is unset, else only when it names `served` (a pinned deployment makes no requests it did not name)."""
    pinned = _pinned()
    return pinned is None or SERVED in (n.lower() for n in pinned)


def room_server() -> str | None:
    """The model server the room's operator started beside the app processes (DECODESCOPE_ROOM_SERVER, set by
    `python -m room --served`), when served models are offered: a session whose address names it connects
    without a Connect click, since the operator chose it, not a link's author. None otherwise."""
    url = os.environ.get("DECODESCOPE_ROOM_SERVER", "").strip()
    return url if url and offers_served() else None


def _bundled_or(name: str) -> str:
    """A bundled model's display name for any of its names ('bundled', 'gemma3-270m', ...), else `name`."""
    bundled = bundled_named(name) if name else None
    return bundled.name if bundled is not None else name


def model_key(name: str) -> str:
    """The name a model is loaded and cached under: an empty box means the server's first model."""
    name = (name or "").strip()
    if name == "":
        offered = offered_models()
        return offered[0] if offered else DEFAULT_MODEL
    return _bundled_or(name)


def offers(name: str) -> bool:
    """Whether this server may load the model called `name`."""
    offered = offered_models()
    return offered is None or model_key(name) in offered


def chosen_key(name: str) -> str:
    """The key the model the sidebar names is loaded under: its name, and the device and precision chosen."""
    key = model_key(name)
    placement = (st.session_state.get("device") or "auto", st.session_state.get("dtype") or "auto")
    return key if placement == ("auto", "auto") else f"{key} [{placement[0]}, {placement[1]}]"


def without_chat_template(name: str) -> bool:
    """Whether the model the sidebar names is loaded (at the device and precision chosen) and has no chat
    template, so that the chat switch can do nothing for it. Never loads."""
    lm = _models().get(chosen_key(name))
    return lm is not None and not lm.facts.has_chat_template


def loaded_model(name: str) -> LoadedModel | None:
    """The model the Model box names when it is loaded already (at its default placement), else None: never loads."""
    return _models().get(model_key(name))


def _placement(key: str) -> tuple:
    """(model name, device, dtype) from a cache key 'name [device, dtype]'."""
    if key.endswith("]") and " [" in key:
        name, rest = key[:-1].rsplit(" [", 1)
        device, _, dtype = rest.partition(", ")
        return name, device, dtype
    return key, "auto", "auto"


def _load_shared(key: str):
    """The shared model called `key`, loading it (with a progress bar) on first use."""
    models = _models()
    if key in models:
        return models[key]
    name, device, dtype = _placement(key)
    offered = offered_models()
    if offered is not None and name not in offered:
        said = t("common.model_not_offered", name=name, models=", ".join(offered))
        raise page_error(ModelLoadError, for_markdown(said), said)
    early = _early.get(key)
    if early is not None and not early.done.is_set():        # the server is still loading it: show how far
        bar = st.progress(0.0, text=for_markdown(t("common.loading_model", name=key)))
        while not early.done.wait(0.25):
            bar.progress(min(max(early.fraction, 0.0), 1.0), text=for_markdown(early.message or key))
        bar.empty()
    with _load_lock:
        if key not in models:
            bar = st.progress(0.0, text=for_markdown(t("common.loading_model", name=key)))
            try:
                lm = load_model(None if name == DEFAULT_MODEL else name, device=device, dtype=dtype,
                                progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=for_markdown(msg)))
            finally:
                bar.empty()
            for other in [k for k in models if k != DEFAULT_MODEL]:
                OPENINGS.forget(models.pop(other))   # keep the default plus at most one user model in memory
            models[key] = lm
            # The libraries and the model live as long as the server. Streamlit collects garbage in full
            # after every run, which walked their ~450,000 objects (a quarter second on 2 cores, on every
            # click, before the browser got the rest of the page); frozen, it looks only at newer objects.
            gc.freeze()
            if lm.cache_rebuilt:
                st.warning(for_markdown(t("common.cache_rebuilt", reason=lm.cache_rebuilt)))
    return models[key]


class _EarlyLoad:
    """How far the load that started with the server has come (read by the first visits while it runs)."""

    def __init__(self):
        self.fraction, self.message, self.done = 0.0, "", threading.Event()

    def progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message


_early: dict = {}


def load_early() -> threading.Thread | None:
    """Start loading the server's first model in a background thread as the server starts, so the first
    visit waits only for what is left (with a progress bar), not for the whole load. A visit that asks for
    it meanwhile waits for this load rather than starting a second one. None when the server offers no
    local model."""
    key = model_key("")
    offered = offered_models()
    if offered is not None and key not in offered:
        return None
    early = _early[key] = _EarlyLoad()

    def run() -> None:
        try:
            with _load_lock:
                models = _models()
                if key not in models:
                    models[key] = load_model(None if key == DEFAULT_MODEL else key, progress=early.progress)
                    gc.freeze()                  # as _load_shared does: later collections skip the libraries
        except DecodeScopeError:
            pass                                 # the first visit loads it again and names the problem
        finally:
            early.done.set()

    thread = threading.Thread(target=run, name="load-early", daemon=True)
    thread.start()
    return thread


def get_lm(name: str = ""):
    """The model this user chose, on the device and in the precision chosen in the sidebar, or None
    after a clear message.

    A name that cannot be loaded (or that this server does not offer) is named in the message,
    and the model this user had before is used again, so the results on screen stay."""
    key = chosen_key(name)
    try:
        lm = _load_shared(key)
    except DecodeScopeError as exc:
        previous = st.session_state.get("_last_model")
        said = t("common.model_error", error=engine_text(exc))
        if previous is None or previous == key:
            st.error(said)
            return None
        keep_or_stop(exc, have_previous=True, message=said)
        try:
            return _load_shared(previous)
        except DecodeScopeError:
            return None
    st.session_state["_last_model"] = key
    if st.session_state.get("chat") and not lm.facts.has_chat_template:
        st.rerun()              # the sidebar, which now sees this model, turns the chat switch off and says why
    return lm


def draft_model(name: str):
    """The second model of a speculative draft, shared like the main one; raises DecodeScopeError (a model this
    server does not offer, or one that cannot be loaded) for the page to show; a name too long for one is named
    as the draft's, in the words the decode's own check uses."""
    check_model_name(name, "draft")
    return _load_shared(model_key(name))
