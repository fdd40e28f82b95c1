"""The served part of "Same prompt, another answer": N identical temperature-0 requests to the server the sidebar
connected, at the concurrency levels chosen; the distinct completions as a histogram, where they part, and the
server's own top-2 margin there. Requests go out only on a click (a shared server is someone's server), and the
last result stays on screen when a new one fails."""
from __future__ import annotations

import streamlit as st

from engine import DecodeScopeError
from engine.reproduce.served import distinct_completions, first_divergence, send_identical
from figures.labels import for_markdown, one_line
from figures.reproduce import served_histogram
from ui.chart import show_figure
from ui.i18n import t
from ui.present import sized
from ui.results import show_error
from ui.settings import bounds, read, sync_url
from ui.sidebar import connected_server

S = st.session_state
LEVELS = ("1", "2", "4", "8", "16")
MAX_TOKENS = 32


def served_section(settings, box) -> None:
    """The served study; `box`: the page's settings container, where its two controls go."""
    st.subheader(t("rp.served_header"))
    st.markdown(t("rp.served_intro"))
    server = connected_server()
    if server is None:
        st.info(t("served.connect_first"))
        return
    c1, c2 = box.columns(2)
    requests = int(c1.number_input(t("rp.requests"), *bounds("rp_requests"), value=read("rp_requests"), step=1,
                                   key="rp_requests", help=t("rp.requests_help")))
    levels = c2.multiselect(t("rp.levels"), LEVELS, default=read("rp_levels"), key="rp_levels",
                            help=t("rp.levels_help"))
    sync_url(rp_requests=requests, rp_levels=",".join(levels))
    tokens = min(settings.max_new_tokens, MAX_TOKENS)
    plan = (server.url, server.model, settings.prompt, requests, tuple(sorted(int(x) for x in levels)), tokens)
    if st.button(t("rp.send", n=requests * len(levels)), key="rp_send", icon="📨", type="primary",
                 disabled=not levels):
        bar = st.progress(0.0, text=t("rp.sending", done=0, total=requests * len(levels)))
        try:
            found = send_identical(server, settings.prompt, requests, plan[4], tokens,
                                   progress=lambda done, total: bar.progress(done / total, text=t(
                                       "rp.sending", done=done, total=total)))
        except DecodeScopeError as exc:
            show_error(t("rp.served_failed", error=str(exc)))
        else:
            S["rp_served"], S["rp_served_plan"] = found, plan
        bar.empty()
    found = S.get("rp_served")
    if found is None:
        st.caption(t("rp.served_waiting", tokens=tokens))
        return
    if S.get("rp_served_plan") != plan:
        st.caption(t("rp.served_older"))
    show_served(found, server.kind)


def show_served(levels: list, kind: str) -> None:
    labels = {"title": t("rp.hist_title"), "x": t("rp.hist_x"), "y": t("rp.hist_y"), "level": t("rp.hist_level")}
    show_figure(sized(served_histogram(levels, labels)), key="rp_served_chart")
    lines = []
    for level in levels:
        found = distinct_completions(level.completions)
        first = first_divergence(level.completions)
        lines.append(t("rp.served_level", level=level.concurrency, n=len(level.completions), distinct=len(found),
                       first="-" if first is None else first + 1))
    st.markdown("\n".join(f"- {line}" for line in lines))
    every = distinct_completions([c for level in levels for c in level.completions])
    if len(every) == 1:
        st.success(t("rp.served_one", kind=for_markdown(kind)))
    for i, d in enumerate(every):
        text = one_line(d.completion.text)
        if d.parts_at is None:
            st.markdown(t("rp.served_top", count=d.count, text=text))
        else:
            margin = "-" if d.margin is None else f"{d.margin:.4g}"
            st.markdown(t("rp.served_other", i=i + 1, count=d.count, at=d.parts_at + 1, margin=margin, text=text))
