"""Where a whole answer ends, chosen on the Whole answers page: at the end token only, at a newline, at 。, at
either, or at the reader's own stop strings (engine/answers/stops.py); and the sentence that names the choice
beside the page's numbers, since every probability on it depends on where answers end."""
from __future__ import annotations

from engine.answers.stops import MAX_STOP_CHARS, MAX_STOPS, PRESETS, escape, parse_stop_lines
from engine.errors import ConfigError
from figures.labels import for_markdown
from ui.i18n import t
from ui.results import show_error
from ui.settings import read, sync_url

CHOICES = ("none", "newline", "period", "cjk_period", "newline_cjk_period", "own")


def end_controls(box) -> tuple:
    """The choice (and, for the reader's own, the stop strings typed one a line); returns the stop strings.
    A list that cannot be used is named in one sentence and the answers end at the end token meanwhile."""
    left, right = box.columns([1, 2])
    choice = left.selectbox(t("answers_end.ends"), CHOICES, key="wa_stops", index=CHOICES.index(read("wa_stops")),
                            format_func=lambda c: t(f"answers_end.ends_{c}"), help=t("answers_end.ends_help"))
    if choice != "own":
        sync_url(wa_stops=choice, wa_stop_own=None)
        return PRESETS[choice]
    typed = right.text_area(t("answers_end.own"), key="wa_stop_own", value=read("wa_stop_own"), height=68,
                            help=t("answers_end.own_help", n=MAX_STOPS, chars=MAX_STOP_CHARS))
    sync_url(wa_stops=choice, wa_stop_own=typed)
    try:
        stops = parse_stop_lines(typed)
    except ConfigError:
        stops = None
    if not stops:
        show_error(t("answers_end.bad_stops", n=MAX_STOPS, chars=MAX_STOP_CHARS), box=right)
        return ()
    return stops


def shown(stop: str) -> str:
    """One stop string as the page names it, quoted, a newline written \\n: safe in Markdown."""
    return "“" + for_markdown(escape(stop)) + "”"


def ends_line(stops) -> str:
    """The sentence that says where the answers end (Markdown)."""
    if not stops:
        return t("answers_end.line_none")
    return t("answers_end.line_stops", stops=t("answers_end.list_sep").join(shown(s) for s in stops))


def with_ends(sentence: str, stops) -> str:
    """A sentence about the page's numbers, followed by where the answers end."""
    return t("answers_end.with_ends", before=sentence, ends=ends_line(stops))


def ends_short(stops) -> str:
    """The same, short, for a figure's title (plain text)."""
    if not stops:
        return ""
    return " · " + t("answers_end.ends") + " " + t("answers_end.list_sep").join(escape(s) for s in stops)
