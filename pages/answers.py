"""Page: whole answers. Which text the model finds most likely, how much of the distribution the tree holds,
where greedy, beam search and samples land, and how sure the model is of its answer."""
import math

import pandas as pd
import streamlit as st

from engine import DecodeScopeError, TraceFormatError
from engine.answers.meaning import forks, normalise
from engine.answers.record import from_json, to_json
from figures.answers import icicle, uncertainty_map
from figures.labels import for_markdown, visible
from ui.answers_notes import certificate_line, entropy_lines, strategy_label
from ui.agreement_view import agreement_section
from ui.answers_end import end_controls, ends_line, ends_short, with_ends
from ui.answers_run import explore_watched, identity_of, kept, request, shared_run
from ui.answers_saved import live_settings, show_saved_run
from ui.chart import show_figure
from ui.file_text import isolated
from ui.export import answers_file_name
from ui.i18n import t
from ui.page import open_page, shared_model
from ui.present import main_chart, scroll_to_section, sized
from ui.results import keep_or_stop, show_error
from ui.settings import bounds, read, sync_url

page = open_page("answers", slot=False)
row, settings = page.row, page.settings

# ---- controls ----------------------------------------------------------------------------------
box = row["settings"]
c1, c2, c3, c4 = box.columns(4)
depth = c1.slider(t("answers.depth"), *bounds("wa_depth"), key="wa_depth", value=read("wa_depth"),
                  help=t("answers.depth_help"))
budget = c2.slider(t("answers.budget"), *bounds("wa_budget"), key="wa_budget", value=read("wa_budget"),
                   help=t("answers.budget_help"))
branch = c3.slider(t("answers.branch"), *bounds("wa_branch"), key="wa_branch", value=read("wa_branch"),
                   help=t("answers.branch_help"))
samples = c4.slider(t("answers.samples"), *bounds("wa_samples"), key="wa_samples", value=read("wa_samples"),
                    help=t("answers.samples_help"))
d1, d2, d3, d4 = box.columns(4)
kinds = ("model", "sampler")
kind = d1.radio(t("answers.distribution"), kinds, key="wa_dist", index=kinds.index(read("wa_dist")),
                format_func=lambda k: t("answers.dist_" + k), horizontal=True)
temperature = d2.slider(t("answers.temperature"), *bounds("wa_temperature"), key="wa_temperature",
                        value=read("wa_temperature"), disabled=kind == "model")
top_p = d3.slider(t("answers.top_p"), *bounds("wa_top_p"), key="wa_top_p", value=read("wa_top_p"),
                  disabled=kind == "model")
beams = d4.multiselect(t("answers.beams"), ["2", "4", "8"], key="wa_beams", default=read("wa_beams"),
                       help=t("answers.beams_help"))
sync_url(wa_depth=depth, wa_budget=budget, wa_branch=branch, wa_samples=samples, wa_dist=kind,
         wa_temperature=temperature, wa_top_p=top_p, wa_beams=",".join(beams))
stops = end_controls(box)
tree_settings, widths = request(depth, budget, branch, kind, temperature, top_p, beams, stops)

def share(x: float) -> str:
    """A probability as a percentage, with the digits that tell a tiny one from 0 and a near-certain one from 1."""
    if x < 1e-4:
        return f"{x:.2e}"
    if 1 - 1e-4 < x < 1:
        return t("answers.near_one", rest=f"{1 - x:.2e}")
    return f"{x:.2%}"


# ---- the ledger and the tree (drawn as soon as the tree is grown) ------------------------------------
def show_tree(tree) -> bool:
    """The ledger and the tree: drawn by a new run as soon as its tree is grown, else after the run is read."""
    ledger = tree.ledger
    shown = tree.settings.distribution
    detail = t("answers.detail_model") if shown.kind == "model" else \
        t("answers.detail_sampler", temperature=f"{shown.temperature:g}", top_p=f"{shown.top_p:g}")
    st.caption(with_ends(t("answers.which_distribution", what=t("answers.about_" + shown.kind), detail=detail),
                         tree.settings.stops))
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(t("answers.m_answers"), share(ledger.answers), help=t("answers.m_answers_help"))
    m2.metric(t("answers.m_prefixes"), share(ledger.prefixes), help=t("answers.m_prefixes_help",
                                                                         open=share(ledger.open_prefixes),
                                                                         cut=share(ledger.cut_at_depth)))
    m3.metric(t("answers.m_left_out"), share(ledger.left_out), help=t("answers.m_left_out_help"))
    m4.metric(t("answers.m_total"), f"{ledger.total:.6f}", help=t("answers.m_total_help"))

    labels = {k: t("answers.kind_" + k) for k in ("answer", "prefix", "open", "left_out", "cut", "small")}
    labels.update(column=t("answers.column"), mass=t("answers.mass"), nats=t("answers.nats"),
                  title=t("answers.tree_title", n=f"{tree.expansions:,}", depth=tree.settings.depth)
                  + ends_short(tree.settings.stops))
    labels["groups"] = t("answers.groups_below")
    main_chart(icicle(tree, labels, forks=forks(tree)), "wa_tree", page.slot)
    st.caption(t("answers.tree_caption"))
    return True


# ---- a saved run, or a new one -----------------------------------------------------------------
uploaded = box.file_uploader(t("answers.open_file"), type=["json"], key="wa_upload", help=t("answers.open_file_help"))
run, stopped, drawn = None, False, []
if uploaded is not None:
    memo = st.session_state.get("_wa_read")
    if memo is None or memo[0] != uploaded.file_id:
        try:
            memo = (uploaded.file_id, from_json(uploaded.getvalue()), None)
        except TraceFormatError as exc:
            memo = (uploaded.file_id, None, str(exc))
        st.session_state["_wa_read"] = memo
    if memo[2] is not None:
        show_error(t("answers.bad_file", name=uploaded.name[:200], error=memo[2]))
    else:
        run = memo[1]
        st.success(t("answers.showing_file", model=for_markdown(isolated(run.model, 200))))
        show_saved_run(run, live_settings(settings.prompt, settings.chat, settings.seed, tree_settings, samples,
                                          widths))
if run is None:
    lm = shared_model(settings)
    identity = identity_of(lm, settings.prompt, settings.chat, tree_settings, widths, samples, settings.seed)
    run = kept(identity)
    stopped = run is not None
    if run is None and st.session_state.get("wa_run_id") == identity:
        run = st.session_state["wa_run"]
    if run is None:
        # the same settings finished (or under way) in any session: its tree drawn as soon as it is grown
        run = shared_run(identity, on_tree=lambda grown: drawn.append(show_tree(grown)))
        if run is not None:
            st.session_state["wa_run"], st.session_state["wa_run_id"] = run, identity
    if run is None:
        try:
            run = explore_watched(lm, settings.prompt, tree_settings, settings.chat, (1, *widths), samples,
                                  settings.seed, identity, on_tree=lambda grown: drawn.append(show_tree(grown)))
        except DecodeScopeError as exc:
            keep_or_stop(exc, "wa_run" in st.session_state)
            run = st.session_state["wa_run"]
        else:
            st.session_state["wa_run"], st.session_state["wa_run_id"] = run, identity

tree = run.tree
ledger = tree.ledger
if stopped or tree.stopped:
    st.warning(t("answers.stopped", n=f"{tree.expansions:,}", budget=f"{tree.settings.budget:,}"))
if not drawn:
    show_tree(tree)

# ---- the answers, ranked -------------------------------------------------------------------------
st.subheader(t("answers.ranked"), anchor="ranked")
scroll_to_section("ranked")          # a link that names this section lands here
certified = tree.certified_count
if certified:
    st.markdown(t("answers.certified", k=certified, depth=tree.settings.depth))
else:
    st.markdown(certificate_line(tree))
if tree.settings.stops:
    st.caption(ends_line(tree.settings.stops))
where: dict = {}
for x in run.landings:
    where.setdefault(x.key, []).append(strategy_label(x.strategy))
counts = {(o.token_ids, o.text): o.count for o in (run.samples.outcomes if run.samples else ()) if o.complete}
table = pd.DataFrame([{
    t("answers.col_rank"): i + 1,
    t("answers.col_answer"): visible(a.text) if a.text else t("answers.empty"),
    t("answers.col_prob"): a.prob,
    t("answers.col_logp"): round(a.logprob, 3),
    t("answers.col_tokens"): len(a.token_ids),
    t("answers.col_sure"): "✓" if tree.beyond_reach(a.logprob) else "?",
    t("answers.col_who"): ", ".join(where.get(a.key, [])),
    t("answers.col_sampled"): counts.get(a.key, 0),
    t("answers.col_group"): normalise(a.text)[:60],
} for i, a in enumerate(tree.answers[:100])])
st.dataframe(table, hide_index=True, width="stretch",
             column_config={t("answers.col_prob"): st.column_config.NumberColumn(format="%.3g")})
if tree.answers:
    top = tree.answers[0]
    st.markdown(t("answers.mode_share", text=for_markdown(visible(top.text)) if top.text else t("answers.empty"),
                  p=share(top.prob), covered=share(ledger.answers)))

# ---- where each strategy lands ---------------------------------------------------------------------
st.subheader(t("answers.landed"), anchor="landed")
scroll_to_section("landed")
if not run.landings:
    st.markdown(t("answers_end.landed_none_stopped" if stopped or tree.stopped else "answers_end.landed_none"))
for x in run.landings:
    name = strategy_label(x.strategy)
    text = for_markdown(visible(x.text)) if x.text else t("answers.empty")
    if not x.complete:       # its first `depth` tokens, and it goes on
        st.markdown(t("answers.landed_open", who=name, text=t("answers_end.unended", text=text),
                      depth=tree.settings.depth, p=f"{math.exp(x.logprob):.3g}"))
    else:
        st.markdown(t("answers.landed_rank" if x.exact_rank else "answers.landed_rank_found", who=name, text=text,
                      rank=x.rank, p=f"{math.exp(x.logprob):.3g}"))

# ---- samples against the exact tree ---------------------------------------------------------------
if run.samples is not None:
    s = run.samples
    st.subheader(t("answers.samples_header", n=s.samples))
    q1, q2, q3 = st.columns(3)
    q1.metric(t("answers.unsampled_exact"), share(s.unsampled), help=t("answers.unsampled_exact_help"))
    q2.metric(t("answers.good_turing"), share(s.good_turing),
              help=t("answers.good_turing_help", n1=s.seen_once, n=s.samples))
    q3.metric(t("answers.tree_outside"), share(1 - ledger.answers), help=t("answers.tree_outside_help"))
    st.dataframe(pd.DataFrame([{
        t("answers.col_count"): o.count,
        t("answers.col_answer"): (visible(o.text) if o.text else t("answers.empty"))
        + ("" if o.complete else " …"),
        t("answers.col_prob"): math.exp(o.logprob),
        t("answers.col_rank"): str(tree.rank_of(o.logprob)) if o.complete else "–",
    } for o in s.outcomes[:60]]), hide_index=True, width="stretch",
        column_config={t("answers.col_prob"): st.column_config.NumberColumn(format="%.3g")})
    st.caption(with_ends(t("answers.samples_caption", depth=tree.settings.depth), tree.settings.stops))

# ---- uncertainty: of the next token, and of the answer -----------------------------------------------
st.subheader(t("answers.uncertainty"), anchor="uncertainty")
scroll_to_section("uncertainty")
labels_map = {"entropy": t("answers.entropy_axis"), "varentropy": t("answers.varentropy_axis"),
              "map_title": t("answers.map_title")}
show_figure(sized(uncertainty_map(tree, labels_map)), key="wa_map")
st.markdown(t("answers.quadrants"))
if tree.answers:
    st.markdown(entropy_lines(tree, run.samples))
st.caption(t("answers.grouping_note"))

run = agreement_section(run)        # MBR and self-consistency beside the mode; the run keeps its settings

# ---- save ------------------------------------------------------------------------------------------
st.download_button(t("answers.download"), data=lambda: to_json(run), file_name=answers_file_name(run),
                   mime="application/json", key="wa_download", icon="💾", on_click="ignore")
