"""Page: the beam tree recorded by the search, grown step by step, re-ranked live by the length penalty."""
import pandas as pd
import streamlit as st

from engine import DecodeScopeError
from engine.decoding.rerank import MARK, marked_text, parting, rerank
from figures.beam_tree import beam_tree_figure
from figures.labels import for_markdown, visible, wrappable
from engine.budget import step_budget, tokens_within_budget
from ui.export import export_bar
from ui.i18n import t
from ui.page import open_page
from ui.present import main_chart, shortcut, stage
from ui.progress import stopped_note, watched_decode
from ui.results import keep_or_stop
from ui.served import served_badge, served_limits, served_trace, with_badge
from ui.settings import bounds, read, rerun, sync_url
from ui.shared_model import get_lm
from ui.sidebar import LIGHT_NEW_TOKENS, connected_server, model_facts_panel, served_selected
from ui.strategy import make_config

S = st.session_state
PLAY_SECONDS = 0.7                 # Play's timer: a step of the tree every 0.7 s

# several decodes per run: open short; the tree's slot is made where the search has ended
page = open_page("beam", new_tokens=LIGHT_NEW_TOKENS, copy_link=True, slot=False, upload="beam_upload",
                 refuse=lambda trace: None if trace.nodes else t("beam.upload_no_tree", strategy=trace.config.strategy))
row, settings, uploaded = page.row, page.settings, page.uploaded

# ---- the search: an uploaded trace, a search on a server, or a search on the shared model ---------
if uploaded is not None:
    model_facts_panel(uploaded.model_facts)
    trace = uploaded
    viewing = True
else:
    viewing = False
    if "beam_search_lp" not in S:
        S["beam_search_lp"] = read("length_penalty")
    cols = row["settings"].columns(3)
    beams = cols[0].slider(t("step.num_beams"), *bounds("num_beams"), key="num_beams",
                           value=read("num_beams"), help=t("step.num_beams_help"))
    early = cols[1].toggle(t("beam.early_stopping"), key="early_stopping",
                           value=read("early_stopping"), help=t("beam.early_stopping_help"))
    cols[2].metric(t("beam.search_lp"), f"{S['beam_search_lp']:g}", help=t("beam.search_lp_help"))
    new_tokens = tokens_within_budget(beams, settings.max_new_tokens)     # each beam is a forward pass a step
    if new_tokens < settings.max_new_tokens:
        st.info(t("beam.capped", n=new_tokens, asked=settings.max_new_tokens, beams=beams,
                  budget=f"{step_budget():,}"))
    if served_selected():         # the search runs on the server, driven from here one step at a time
        server = connected_server()
        if server is None:
            st.info(t("served.connect_first"))
            st.stop()
        values = {"strategy": "beam", "num_beams": beams, "length_penalty": S["beam_search_lp"]}
        try:
            config = make_config(settings, values, early_stopping=early, chat=False,
                                 max_new_tokens=new_tokens).validate()
        except DecodeScopeError as exc:
            keep_or_stop(exc, "beam_served" in S)
            trace = S["beam_served"]
        else:
            trace = served_trace("beam_served", server, settings.prompt, config)
        model_facts_panel(trace.model_facts)
        if settings.chat:
            st.caption(t("served.no_chat"))
        served_limits()
        sync_url(num_beams=beams, early_stopping=early, length_penalty=S["beam_search_lp"])
        if S.get("beam_served_shown") != id(trace):     # a new search opens at its last step
            S.pop("beam_upto", None)
            S["beam_served_shown"] = id(trace)
        viewing = True
if not viewing:                    # a search on the shared model
    lm = get_lm(settings.model)
    if lm is None:
        st.stop()
    model_facts_panel(lm.facts)
    values = {"strategy": "beam", "num_beams": beams, "length_penalty": S["beam_search_lp"]}
    try:
        config = make_config(settings, values, early_stopping=early,
                             max_new_tokens=new_tokens).validate(lm.facts.vocab_size)
        key = (lm.name, settings.prompt, config)
        if S.get("beam_key") != key or S.get("beam_partial"):
            # the shared service: a search Compare (or another session) has run is answered from memory
            searched = watched_decode("beam", lm, settings.prompt, config, t("beam.searching", beams=beams))
            if searched is not S.get("beam_trace"):
                S.pop("beam_upto", None)
            S["beam_trace"], S["beam_key"] = searched, key
            S["beam_partial"] = S.get("_held_beam") is not None
    except DecodeScopeError as exc:        # keep the tree already on screen, if there is one
        keep_or_stop(exc, "beam_trace" in S)
    trace = S["beam_trace"]
    stopped_note("beam")
    sync_url(num_beams=beams, early_stopping=early, length_penalty=S["beam_search_lp"])

def _parts_cell(trace, node_id: int, best: int) -> str:
    """Where a hypothesis leaves the best one, by token: texts that read alike still differ here.
    Table cells render Markdown, so token texts are escaped."""
    where = parting(trace, node_id, best)
    if where is None:
        return "—"
    if where.token is None:
        return t("beam.parts_ended", step=where.step)
    if where.other is None:
        return t("beam.parts_longer", step=where.step + 1, token=for_markdown(visible(where.token)))
    return t("beam.parts_at", step=where.step + 1, token=for_markdown(visible(where.token)),
             best=for_markdown(visible(where.other)))


# ---- grow the tree (a step slider and Play), re-rank it: these rerun only the part below -----------
last = len(trace.steps)


def _toggle_play():
    S["beam_playing"] = not S.get("beam_playing", False)
    if S["beam_playing"] and S.get("beam_upto", last) >= last:
        S["beam_upto"] = 0          # play from the start: the run this click starts advances it to step 1
    S["beam_whole_page"] = True     # Play's timer is set when the whole page runs


playing = S.get("beam_playing", False)
S.pop("beam_whole_page", None)      # this run is the whole page


def _play_tick() -> bool:
    """Whether Play runs; on a tick of its timer, one more step of the tree (at the last, Play stops and the
    whole page runs again to show the Play button)."""
    playing = S.get("beam_playing", False)
    if "beam_upto" not in S or S["beam_upto"] > last:
        S["beam_upto"] = last
    if playing:
        if S["beam_upto"] >= last:
            S["beam_playing"] = False
            rerun()
        S["beam_upto"] += 1
    return playing


def _controls(playing: bool) -> None:
    """Play and the slider of steps shown."""
    cols = st.columns([1, 5])
    cols[0].button(t("step.pause") if playing else t("step.play"), key="beam_play", icon="⏸" if playing else "⏯",
                   on_click=_toggle_play, width="stretch", help=t("beam.play_help"), shortcut=shortcut("play"))
    if last > 1:
        cols[1].slider(t("beam.upto"), 1, last, key="beam_upto", help=t("beam.upto_help"))


def _tree_chart(upto: int, live_lp: float, slot):
    """The tree up to step `upto`, scored under the live length penalty, in the stage's slot; returns the figure."""
    fig = beam_tree_figure(trace, upto_step=upto - 1, length_penalty=live_lp, texts={
        "title": t("beam.fig_title"), "x": t("beam.fig_x"), "y": t("beam.fig_y"), "kept": t("beam.fig_kept"),
        "pruned": t("beam.fig_pruned"), "finished": t("beam.fig_finished"), "best": t("beam.fig_best"),
        "collapsed": t("beam.fig_collapsed"), "colour": t("beam.fig_colour"), "prompt": t("beam.fig_prompt"),
        "step": t("beam.fig_step"), "logprob": t("beam.fig_logprob"), "cum": t("beam.fig_cum"),
        "score": t("beam.fig_score"), "rank": t("beam.fig_rank"), "beam": t("beam.fig_beam"),
        "status": t("beam.fig_status")})
    with_badge(fig, served_badge(trace, trace.steps[upto - 1] if trace.steps else None, step=upto))
    main_chart(fig, "beam_chart", slot)
    st.caption(t("beam.legend_note"))
    return fig


def _hypotheses(live_lp: float) -> None:
    """The final hypotheses ranked under the live length penalty, and whether a new search is needed for it."""
    ranking = rerank(trace, live_lp)
    st.subheader(t("beam.table_title", lp=f"{live_lp:g}"))
    st.caption(t("beam.formula"))
    best = ranking.hypotheses[0].node_id if ranking.hypotheses else None
    rows = [{t("beam.col_rank"): i + 1,
             t("beam.col_text"): for_markdown(marked_text(trace, h.node_id, best, show=wrappable)),
             t("beam.col_parts"): _parts_cell(trace, h.node_id, best), t("beam.col_length"): h.length,
             t("beam.col_cum"): round(h.cum_logprob, 4),
             t("beam.col_score"): f"{h.cum_logprob:.3f} / {h.length}^{live_lp:g} = {h.score:.4f}",
             t("beam.col_in_set"): "✅" if h.in_set else "",
             t("beam.col_recorded"): "✅" if h.recorded_in_set else ""}
            for i, h in enumerate(ranking.hypotheses)]
    if rows:
        # a plain table wraps long texts instead of cutting them, and so never pushes a column out of view; every
        # cell renders Markdown, so token texts are escaped
        with st.container(key="beam_table"):
            st.table(pd.DataFrame(rows), hide_index=True)
        if len(rows) > 1:
            st.caption(t("beam.parts_note", mark=MARK))
        lengths = {h.length for h in ranking.hypotheses}
        if len(rows) > 1 and len(lengths) == 1:
            st.info(t("beam.same_length", length=lengths.pop()))
    else:
        st.info(t("beam.no_hypotheses"))
    if ranking.needs_new_search:
        reason = t("beam.changed_stop") if ranking.stop_changed else t("beam.changed_set")
        st.warning(t("beam.needs_search", lp=f"{live_lp:g}", reason=reason))
        if uploaded is None and st.button(t("beam.new_search", lp=f"{live_lp:g}"), key="beam_new_search", icon="🔁"):
            S["beam_search_lp"] = live_lp
            rerun()
    elif abs(live_lp - trace.config.length_penalty) > 1e-9:
        st.success(t("beam.same_survivors", lp=f"{live_lp:g}"))


@st.fragment(run_every=PLAY_SECONDS if playing else None)
def tree_panel():
    """The tree and what moves it: Play's ticks, the step slider and the live length penalty rerun only this."""
    if S.pop("beam_whole_page", False):
        rerun()                  # Play or Pause: the page around changes too
    _controls(_play_tick())
    slot = stage()
    live_lp = st.slider(t("beam.rerank_lp"), *bounds("rerank_lp"), step=0.1, key="rerank_lp",
                        value=read("rerank_lp", float(trace.config.length_penalty)),
                        help=t("beam.rerank_lp_help"))
    if uploaded is None:
        sync_url(rerank_lp=live_lp)
    fig = _tree_chart(S["beam_upto"], live_lp, slot)
    _hypotheses(live_lp)
    st.divider()
    export_bar(trace, fig, "beam-tree", key="beam_export", lesson=True)

tree_panel()
