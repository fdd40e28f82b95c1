"""Errors and per-user results: a bad input is named in one line and the results already on screen stay."""
from __future__ import annotations

import streamlit as st

from engine import DecodeScopeError
from engine.service import shared_service
from figures.labels import for_markdown
from ui.engine_words import engine_text
from ui.i18n import t


def show_error(message: str, box=None) -> None:
    """An error box that shows `message` literally: a model name, prompt or file name typed by
    anyone may look like a link or an image in Markdown, and must stay text."""
    (box or st).error(for_markdown(message))


def keep_or_stop(exc: Exception, have_previous: bool, message: str | None = None) -> None:
    """Say what was wrong; keep the results already on screen when there are some, else stop the page.

    A bad prompt or setting must not wipe out the decode a user was looking at. Each message
    is shown once per run, however many computations it stopped. message: the page's own Markdown for it
    (in the reader's language, anything quoted already made literal); without one, the engine's sentence in the
    reader's language (ui.engine_words)."""
    shown = st.session_state.setdefault("_errors_shown", set())      # emptied by shared_sidebar each run
    if str(exc) not in shown:
        st.error(engine_text(exc) if message is None else message)
        shown.add(str(exc))
    if not have_previous:
        st.stop()
    if "kept" not in shown:
        st.caption(t("common.kept_previous"))
        shown.add("kept")


def cached(name: str, identity: tuple, compute, shared_on=None):
    """Per-user result in session state, recomputed only when its inputs change.

    When the new inputs are bad (a DecodeScopeError), the message is shown and the previous
    result is returned, so what was on screen stays; with no previous result the page stops.
    `shared_on`: the model (a LoadedModel) the value is computed on; the value is then also kept by the
    server's decode service under the model, `name` and `identity`, and another session asking the same is
    answered from memory."""
    state = st.session_state
    if state.get(name + "_id") != identity:
        try:
            value = compute() if shared_on is None else \
                shared_service().remember((shared_on.name, shared_on.facts, name, *identity), compute)
        except DecodeScopeError as exc:
            keep_or_stop(exc, name in state)
            return state[name]
        state[name] = value
        state[name + "_id"] = identity
    return state[name]
