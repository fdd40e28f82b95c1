"""Share and export on every page: the trace as JSON (down and up), the figure as standalone HTML, the run as a
lesson file."""
from __future__ import annotations

import re

import streamlit as st

from engine import Trace, TraceFormatError
from engine.lesson import lesson_html
from figures.labels import for_markdown
from ui.i18n import language, t


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:40] or "trace"


def trace_file_name(trace: Trace, page: str) -> str:
    return f"decodescope-{page}-{trace.config.strategy}-{_slug(trace.prompt)}.json"


def figure_html(fig) -> str:
    """A standalone HTML file with Plotly's JavaScript inside (opens offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def lesson_file_name(trace: Trace, page: str) -> str:
    return f"decodescope-lesson-{page}-{trace.config.strategy}-{_slug(trace.prompt)}.html"


def export_bar(trace: Trace | None, fig, page: str, key: str, lesson: bool = False) -> None:
    """Download buttons for the trace JSON, the current figure and, with `lesson`, the run as a lesson file
    (engine.lesson: one HTML page that steps through it offline). The HTML is built only on click."""
    cols = st.columns(3 if lesson else 2)
    if trace is not None:
        cols[0].download_button(t("export.download_trace"), data=lambda: trace.to_json(indent=1),
                                file_name=trace_file_name(trace, page), mime="application/json",
                                key=f"{key}_trace_json", icon="💾", on_click="ignore",
                                help=t("export.download_trace_help"))
    if trace is not None and lesson:
        cols[1].download_button(t("export.download_lesson"), data=lambda: lesson_html(trace, lang=language()),
                                file_name=lesson_file_name(trace, page), mime="text/html",
                                key=f"{key}_lesson_html", icon="🎓", on_click="ignore",
                                help=t("export.download_lesson_help"))
    if fig is not None:
        cols[-1].download_button(t("export.download_figure"), data=lambda: figure_html(fig),
                                file_name=f"decodescope-{page}.html", mime="text/html",
                                key=f"{key}_figure_html", icon="📊", on_click="ignore",
                                help=t("export.download_figure_help"))


NAME_CHARS = 300       # of a file's name or a model's name in a message


def _read_once(key: str, uploaded) -> tuple:
    """(trace, None) or (None, the reason), read and checked once per file: every rerun of the page (each
    click) would otherwise parse and check the whole file again."""
    memo = st.session_state.get(f"_read_{key}")
    if memo is not None and memo[0] == uploaded.file_id:
        return memo[1], memo[2]
    try:
        result = (Trace.from_json(uploaded.getvalue()), None)
    except TraceFormatError as exc:
        result = (None, str(exc))
    st.session_state[f"_read_{key}"] = (uploaded.file_id, *result)
    return result


def trace_upload(key: str, container=None, refuse=None) -> Trace | None:
    """A file picker for a trace; returns the Trace, or None (after a clear message if the file is bad).

    refuse: trace -> a message, or None; a trace this page cannot show gets only that message, and the
    page stops (a success beside an error left the reader unsure whether the file had been opened)."""
    box = container or st
    uploaded = box.file_uploader(t("export.upload_trace"), type=["json"], key=key, help=t("export.upload_trace_help"))
    if uploaded is None:
        st.session_state.pop(f"_read_{key}", None)
        return None
    trace, error = _read_once(key, uploaded)
    if error is not None:
        box.error(t("export.bad_trace", name=for_markdown(uploaded.name[:NAME_CHARS]), error=for_markdown(error)))
        return None
    problem = refuse(trace) if refuse is not None else None
    if problem:
        box.error(problem)
        st.stop()
    box.success(t("export.showing_upload", name=for_markdown(uploaded.name[:NAME_CHARS]),
                  model=for_markdown(trace.model[:NAME_CHARS])))
    return trace
