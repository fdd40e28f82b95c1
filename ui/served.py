"""A served model on the Step-by-step, Beam-tree and Teacher-forcing pages: the decode with its progress,
the badge every figure drawn from a server's trace carries, and what a server cannot do.

The server is the one the user connected to in the sidebar (ui.sidebar.connected_server); each
page keeps its last trace, so an error (server down, timeout) shows one line above it.
"""
from __future__ import annotations

import math

import streamlit as st

from engine import DecodeConfig, DecodeScopeError, Trace
from engine.served import Server, ServedError
from engine.served.teacher import served_teacher_force
from figures.labels import for_markdown
from figures.served import NUMBERS, badge_text, served_facts, with_badge
from figures.teacher import reference_bars
from ui.engine_words import engine_text, page_error
from ui.i18n import t
from ui.present import main_chart
from ui.progress import stopped_note, watched_served
from ui.results import cached, keep_or_stop

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
        partial = exc.trace if isinstance(exc, ServedError) else None
        if partial is not None and partial.steps:      # the steps received before the fault, never kept as whole
            st.error(t("served.decode_cut_short", n=len(partial.steps), error=engine_text(exc)))
            S[name], S[f"{name}_id"] = partial, None
            return partial
        said = t("served.decode_failed", error=engine_text(exc)) if isinstance(exc, ServedError) else None
        keep_or_stop(exc, name in S, message=said)
        return S[name]
    S[name] = trace
    # a trace Stop cut short is shown with a note and decoded again on Resume: only a whole one is kept
    S[f"{name}_id"] = identity if S.get(f"_held_{name}") is None else None
    stopped_note(name)
    return trace


def number_phrases() -> dict:
    """What a served trace's numbers are (raw, processed, unknown), in the interface's language, for the badge."""
    return {kind: t(f"served.numbers_{kind}") for kind in NUMBERS}


def served_badge(trace, record, box=None, shown: bool = True, **extra) -> str | None:
    """The badge of a figure drawn from a served trace, shown above it (literal text; not shown for a figure
    sent ahead of its step); None, and nothing shown, for a local trace. `extra` fills a template's other
    places (the beam page's step)."""
    template = t("served.badge_beam") if "step" in extra else t("served.badge")
    text = badge_text(trace, record, template, number_phrases(), **extra)
    if text is not None and shown:
        (box or st).info(for_markdown(text), icon="📡")
    return text


def served_limits(box=None, server: Server | None = None, config: DecodeConfig | None = None) -> None:
    """What a server cannot do, said on the page: with the server and the settings, also which of the
    engine-specific samplers it does not take (they do not shape its run), and what a vLLM server takes."""
    box = box or st
    box.info(t("served.cannot"), icon="ℹ️")
    if server is None or config is None:
        return
    from engine.served.samplers import ignored

    names = ignored(server.kind, config)
    if names:
        labels = [t(f"samplers.{name}") if name != "repetition_penalty" else t("step.repetition_penalty")
                  for name in names]
        box.warning(t("served.samplers_ignored", kind=for_markdown(server.kind), settings=", ".join(labels)),
                    icon="🎛️")
    box.caption(t("served.samplers_vllm"))


__all__ = ["served_trace", "served_badge", "served_limits", "served_facts", "with_badge", "number_phrases"]


def served_teacher(server: Server | None, prompt: str, reference: str, slot=None) -> None:
    """Teacher forcing on a served model: each reference token's probability given the true prefix
    (engine.served.teacher), with a badge that says how exact the numbers are; the parts that need whole
    distributions say so."""
    if server is None:
        st.info(t("served.connect_first"))
        st.stop()

    def score():
        try:
            return served_teacher_force(server, prompt, reference)
        except ServedError as exc:
            raise page_error(DecodeScopeError, t("served.teacher_failed", error=engine_text(exc)),
                             t("served.teacher_failed", error=str(exc))) from None

    forced = cached("tf_served", (server.url, server.model, prompt, reference), score)
    n, bounded = len(forced.positions), len(forced.bounded)
    if forced.exact:
        badge = t("served.teacher_badge_exact", kind=server.kind, url=server.url)
    else:
        badge = t("served.teacher_badge_topn", kind=server.kind, url=server.url, n=forced.top_n, bounded=bounded,
                  total=n, n_plus=forced.top_n + 1)
    st.subheader(t("served.teacher_header"))
    st.info(for_markdown(badge), icon="📡")
    at_most, at_least = ("≤ ", "≥ ") if bounded else ("", "")     # a bounded token makes the sum a bound
    cols = st.columns(4)
    cols[0].metric(t("teacher.metric_tokens"), f"{n}")
    cols[1].metric(t("teacher.metric_logprob"), f"{at_most}{forced.logprob:.2f}")
    cols[2].metric(t("teacher.metric_perplexity"), f"{at_least}{math.exp(-forced.logprob / max(n, 1)):.2f}")
    cols[3].metric(t("teacher.metric_top1"), f"{sum(1 for p in forced.positions if p.rank == 1)}/{n}")
    labels = {k: t("teacher." + k) for k in ("prob", "rank", "entropy", "top")}
    labels["divergence"], labels["title"] = t("teacher.divergence_mark"), t("teacher.forced_title")
    main_chart(with_badge(reference_bars(forced, labels), badge), "tf_served_chart", slot)
    st.info(t("served.teacher_needs_weights"))
