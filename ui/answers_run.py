"""Whole answers' run on a page: the tree grown with a progress bar, and kept when the run is stopped.

Any click (Streamlit's own Stop, or a setting changed) makes Streamlit end the page's run at its next element
update, here the progress bar's. The tree's progress callback catches that, lets the search end where it is,
keeps the tree so far under the session's id (the stopped run may no longer touch session state) and lets
the stop go on; the next run of the page shows the kept tree, said to be stopped, until the settings change.
"""
from __future__ import annotations

import threading

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from engine.answers.run import AnswersRun, explore
from ui.i18n import t

_KEPT: dict = {}          # session id -> (identity, the run stopped early)
_LOCK = threading.Lock()


def _session() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def kept(identity: tuple) -> AnswersRun | None:
    """The run a stop left for these settings in this session, if any."""
    with _LOCK:
        entry = _KEPT.get(_session())
    return entry[1] if entry is not None and entry[0] == identity else None


def explore_watched(lm, prompt: str, settings, chat: bool, beams, samples: int, seed: int,
                    identity: tuple) -> AnswersRun:
    """explore() with a progress bar; a stop keeps the tree so far (see the module's docstring)."""
    session = _session()
    bar = st.progress(0.0, text=t("answers.growing"))
    interrupted: list = []

    def progress(fraction: float, line: str) -> None:
        if interrupted:
            return
        try:
            bar.progress(min(fraction, 1.0), text=t("answers.growing_n", line=line))
        except ScriptControlException as exc:
            interrupted.append(exc)

    run = explore(lm, prompt, settings, chat=chat, beams=beams, samples=samples, seed=seed,
                  should_stop=lambda: bool(interrupted), progress=progress)
    if interrupted:
        with _LOCK:
            _KEPT[session] = (identity, run)
        raise interrupted[0]
    with _LOCK:
        _KEPT.pop(session, None)
    bar.empty()
    return run
