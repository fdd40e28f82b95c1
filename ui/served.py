"""A served model on the Step-by-step and Beam-tree pages: the decode with its progress, the badge
every figure drawn from a server's trace carries, and what a server cannot do.

The server is the one the user connected to in the sidebar (ui.session.connected_server); each
page keeps its last trace, so an error (server down, timeout) shows one line above it.
"""
from __future__ import annotations

import streamlit as st

from engine import DecodeConfig, DecodeScopeError, Trace
from engine.served import Server, ServedError
from engine.served_decode import served_decode
from figures.labels import for_markdown
from figures.served import badge_text, served_facts, with_badge
from ui.i18n import t
from ui.progress import stopped_note, watched_served
from ui.session import keep_or_stop

S = st.session_state


def served_trace(name: str, server: Server, prompt: str, config: DecodeConfig) -> Trace:
    """`prompt` decoded on `server` with `config`, with progress and Stop, kept in session state under
    `name` and decoded again only when the server, its model, the prompt or the config change. A failure
    is one line; the trace from before stays (with none, the page stops)."""
    identity = (server.url, server.model, server.kind, prompt, config)
    if name in S and S.get(f"{name}_id") == identity:
        return S[name]
    try:
        trace = watched_served(name, server, prompt, config, label=f"{server.kind} · {config.strategy}")
    except DecodeScopeError as exc:          # ServedError (down, timeout, refused) and bad settings alike
        if isinstance(exc, ServedError):
            exc = DecodeScopeError(t("served.decode_failed", error=str(exc)))
        keep_or_stop(exc, name in S)
        return S[name]
    S[name] = trace
    # a trace Stop cut short is shown with a note and decoded again on Resume: only a whole one is kept
    S[f"{name}_id"] = identity if S.get(f"_held_{name}") is None else None
    stopped_note(name)
    return trace


def served_badge(trace, record, box=None, **extra) -> str | None:
    """The badge of a figure drawn from a served trace, shown above it (literal text); None, and nothing
    shown, for a local trace. `extra` fills a template's other places (the beam page's step)."""
    template = t("served.badge_beam") if "step" in extra else t("served.badge")
    text = badge_text(trace, record, template, **extra)
    if text is not None:
        (box or st).info(for_markdown(text), icon="📡")
    return text


def served_limits(box=None) -> None:
    """What a server cannot do, said on the page."""
    (box or st).info(t("served.cannot"), icon="ℹ️")


__all__ = ["served_trace", "served_badge", "served_limits", "served_facts", "with_badge"]
