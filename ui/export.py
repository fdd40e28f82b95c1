"""Share and export on every page: the trace as JSON (down and up), the figure as standalone HTML, the run as a
lesson file."""
from __future__ import annotations

import re
from datetime import datetime

import streamlit as st

from engine import Trace, TraceFormatError
from engine.lesson import lesson_html
from engine.lesson.notes import MAX_NOTE, MAX_TITLE
from figures.labels import for_markdown
from ui.file_text import isolated
from ui.engine_words import detail_text
from ui.i18n import language, t


def _slug(text: str) -> str:
    """A file name's piece from a prompt: its letters and digits in any script (法国的首都是 stays itself), every
    other run of characters one '-', at most 40 characters."""
    return re.sub(r"[\W_]+", "-", text).strip("-")[:40].strip("-") or "trace"


def answers_file_name(run, when: datetime | None = None) -> str:
    """A Whole answers run's file name, from its prompt, its settings and the time it is saved, so that two
    runs saved one after another do not take the same name: 'decodescope-answers-The-capital-of-France-is-
    depth8-budget200-branch8-model-20260105-1430.json' ('sampler-t0.7-k0-p0.9-m0' for the sampler's)."""
    settings = run.tree.settings
    dist = settings.distribution
    kind = "model" if dist.kind == "model" else \
        f"sampler-t{dist.temperature:g}-k{dist.top_k}-p{dist.top_p:g}-m{dist.min_p:g}"
    stamp = (when or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return (f"decodescope-answers-{_slug(run.prompt)}{'-chat' if run.chat else ''}-depth{settings.depth}-"
            f"budget{settings.budget}-branch{settings.branch}-{kind}-{stamp}.json")


def trace_file_name(trace: Trace, page: str) -> str:
    return f"decodescope-{page}-{trace.config.strategy}-{_slug(trace.prompt)}.json"


def figure_html(fig) -> str:
    """A standalone HTML file with Plotly's JavaScript inside (opens offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def lesson_file_name(trace: Trace, page: str) -> str:
    return f"decodescope-lesson-{page}-{trace.config.strategy}-{_slug(trace.prompt)}.html"


NOTE_LINE = re.compile(r"^\s*(\d{1,6})\s*[:：]\s*(.*?)\s*$")     # "3: note" (or "3：" typed in Chinese)
NOTES_CHARS = 50_000
LINE_END = re.compile(r"\r?\n")


def lesson_notes(text: str, steps: int) -> tuple:
    """A teacher's notes typed one a line, "step: note", as ({"<step>": note}, None); or ({}, the first line that
    is not such a note, in one sentence). Two lines for one step join. Lines end at a newline only, as the box
    shows them: str.splitlines would also split at U+2028, U+0085 or a form feed typed inside a note."""
    notes: dict = {}
    for number, line in enumerate(LINE_END.split(text), start=1):
        if not line.strip():
            continue
        found = NOTE_LINE.match(line)
        if found is None:
            return {}, t("export.lesson_note_line", line=number)
        step, note = int(found.group(1)), found.group(2)
        if not 1 <= step <= steps:
            return {}, t("export.lesson_note_step", line=number, step=step, n=steps)
        if len(note) > MAX_NOTE:
            return {}, t("export.lesson_note_long", line=number, limit=MAX_NOTE)
        notes[str(step)] = f"{notes[str(step)]}\n{note}" if str(step) in notes else note
    return notes, None


def lesson_button(trace: Trace, page: str, key: str) -> None:
    """Download lesson, and beside it the teacher's title and notes for the file. The notes are read before the
    button (a widget's value is in session state when the run starts), so the file holds what is typed; notes
    that are not "step: note" lines keep the button off and say which line."""
    title_key, notes_key = f"{key}_lesson_title", f"{key}_lesson_notes"
    title = st.session_state.get(title_key, "").strip()
    notes, problem = lesson_notes(st.session_state.get(notes_key, ""), len(trace.steps))
    lang = language()            # read in the run: the file is built later, when the button is clicked
    st.download_button(t("export.download_lesson"),
                       data=lambda: lesson_html(trace, lang=lang, title=title, notes=notes),
                       file_name=lesson_file_name(trace, page), mime="text/html", key=f"{key}_lesson_html",
                       icon="🎓", on_click="ignore", help=t("export.download_lesson_help"),
                       disabled=problem is not None)
    with st.popover(t("export.lesson_words"), icon="✏️"):
        st.text_input(t("export.lesson_title"), key=title_key, max_chars=MAX_TITLE)
        st.text_area(t("export.lesson_notes"), key=notes_key, max_chars=NOTES_CHARS,
                     help=t("export.lesson_notes_help"), placeholder="1: …\n5: …")
    if problem is not None:
        st.error(problem)


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
        with cols[1]:
            lesson_button(trace, page, key)
    if fig is not None:
        cols[-1].download_button(t("export.download_figure"), data=lambda: figure_html(fig),
                                file_name=f"decodescope-{page}.html", mime="text/html",
                                key=f"{key}_figure_html", icon="📊", on_click="ignore",
                                help=t("export.download_figure_help"))


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

    refuse: trace -> a message, or None; a trace this page cannot show gets only that message (a success
    beside an error left the reader unsure whether the file had been opened), and None is returned, so the
    page goes on with its live result under the message."""
    box = container or st
    uploaded = box.file_uploader(t("export.upload_trace"), type=["json"], key=key, help=t("export.upload_trace_help"))
    if uploaded is None:
        st.session_state.pop(f"_read_{key}", None)
        return None
    trace, error = _read_once(key, uploaded)
    if error is not None:
        box.error(t("export.bad_trace", name=for_markdown(isolated(uploaded.name)), error=detail_text(error)))
        return None
    problem = refuse(trace) if refuse is not None else None
    if problem:
        box.error(problem)
        return None
    box.success(t("export.showing_upload", name=for_markdown(isolated(uploaded.name)),
                  model=for_markdown(isolated(trace.model))))
    return trace
