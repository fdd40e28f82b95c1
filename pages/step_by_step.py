"""Page: decode one token at a time, see the candidates at each step, and branch."""
import math
import time

import streamlit as st
from streamlit.errors import StreamlitAPIException

from engine import DecodeScopeError
from engine.decoding.stepper import Stepper
from figures.candidates import candidates_figure
from figures.served import other_mass
from figures.labels import for_markdown, visible
from ui.export import export_bar
from ui.engine_words import engine_text
from ui.i18n import language, t
from ui.page import open_page
from ui.pipeline import render_escape, render_lens, render_stages, step_inputs
from ui.present import main_chart, presenting, shortcut, upcoming_chart
from ui.progress import prompt_progress
from ui.replay import replay_to
from ui.results import keep_or_stop
from ui.served import served_badge, served_facts, served_limits, served_trace, with_badge
from ui.settings import read, rerun, sync_url
from ui.shared_model import get_lm
from ui.sidebar import connected_server, model_facts_panel, served_selected
from ui.strategy import make_config, step_caption, strategy_controls
from ui.token_view import legend_html, token_html, tokens_of
from ui.uncertainty import chosen_unit, in_unit, render_uncertainty, unit_word
from ui.what_happened import flagged_steps, render_what_happened

S = st.session_state
UNCERTAINTY = "sbs_uncertainty"     # the uncertainty panel's key: its nats / bits switch sets the metrics too
PLAY_STEP_SECONDS = 0.1            # Play's pace: ten steps a second, where the machine and the browser keep up
PLAY_TIMER_SECONDS = 0.01          # the fragment's timer, started again after each drawing; the server-side
                                   # sleep in _play_tick sets the pace, so a longer timer only adds to each tick
                                   # (4.6 -> 5.0 steps/s)

page = open_page("step", copy_link=True, slot=False, upload="sbs_upload")   # the chart is placed by its panel
row, settings, uploaded = page.row, page.settings, page.uploaded

# ---- the stepper: a recorded trace, a decode on a server, or a live decode on the shared model -------
# a trace only viewed: no branching, no decode from here (Play moves the cursor)
recorded = uploaded
if uploaded is not None:
    model_facts_panel(uploaded.model_facts)
    if S.get("sbs_viewer_of") is not uploaded:      # trace_upload gives the same object until the file changes
        S["sbs_viewer"], S["sbs_viewer_of"] = Stepper.viewing(uploaded), uploaded
    stepper = S["sbs_viewer"]
    st.info(t("step.viewing_upload", steps=len(uploaded.steps), strategy=uploaded.config.strategy))
elif served_selected():                   # the server decodes the whole run; the page shows what it reported
    values = strategy_controls(("greedy", "sample", "beam"), container=row["settings"], samplers=True)
    server = connected_server()
    if server is None:
        st.info(t("served.connect_first"))
        st.stop()
    if settings.chat:
        st.caption(t("served.no_chat"))
    try:
        config = make_config(settings, values, chat=False).validate()
    except DecodeScopeError as exc:        # keep the served decode already on screen, if there is one
        keep_or_stop(exc, "sbs_served" in S)
        recorded = S["sbs_served"]
    else:
        recorded = served_trace("sbs_served", server, settings.prompt, config)
    model_facts_panel(recorded.model_facts)
    if not recorded.steps:
        st.info(t("served.no_steps"))
        st.stop()
    if S.get("sbs_viewer_of") is not recorded:
        S["sbs_viewer"], S["sbs_viewer_of"] = Stepper.viewing(recorded), recorded
    stepper = S["sbs_viewer"]
    st.info(t("served.viewing", steps=len(recorded.steps), strategy=recorded.config.strategy))
    served_limits(server=server, config=recorded.config)
else:
    values = strategy_controls(("greedy", "sample", "beam", "soft", "gumbel"), container=row["settings"], samplers=True)
    lm = get_lm(settings.model)
    if lm is None:
        st.stop()
    model_facts_panel(lm.facts)
    try:
        config = make_config(settings, values).validate(lm.facts.vocab_size)
        identity = (lm.name, settings.prompt)
        stepper = S.get("sbs")
        if not isinstance(stepper, Stepper) or S.get("sbs_identity") != identity:
            arriving = not isinstance(stepper, Stepper)      # a link's step counts once: a new prompt opens on 1
            with prompt_progress():                          # a long prompt's first pass: a bar, not a blank page
                stepper = Stepper(lm, settings.prompt, config)
            S["sbs"], S["sbs_identity"] = stepper, identity
            if arriving and read("step") > 1:      # with a progress bar and Stop: a link may ask for 1,024 steps
                replay_to(stepper, read("step") - 1)
        else:
            with prompt_progress():                          # new settings may replay from the prompt
                stepper.reconfigure(config)
        if "sbs_goto" in S:                # the loop-escape button asked to look at the loop's step again
            stepper.go(S.pop("sbs_goto"))
    except DecodeScopeError as exc:        # keep the decode already on screen, if there is one
        stepper = S.get("sbs")
        keep_or_stop(exc, isinstance(stepper, Stepper))


# ---- controls: callbacks run before the page, so the slider can follow the cursor -------
def _do(action, *args):
    try:
        getattr(stepper, action)(*args)
    except DecodeScopeError as exc:
        S["sbs_error"] = engine_text(exc)      # Markdown, in the reader's language
    S["sbs_slider"] = stepper.cursor + 1


def _slider_moved():
    _do("go", S["sbs_slider"] - 1)


def _toggle_play():
    """Play or Pause. Play on the last step of a finished run starts over from the first step: a trace that is
    only viewed is usually looked through first, and would otherwise have nothing left to play."""
    S["sbs_playing"] = not S.get("sbs_playing", False)
    if S["sbs_playing"] and stepper.finished() and stepper.cursor + 1 >= len(stepper.steps()):
        _do("go", 0)
    S["sbs_whole_page"] = True            # Play's timer is set when the whole page runs


def _rerun_panel():
    """Run the stepper's fragment again; on a run of the whole page, the whole page (Streamlit allows
    scope="fragment" only during a fragment's own rerun)."""
    try:
        rerun(scope="fragment")
    except StreamlitAPIException:
        rerun()


def branch_label(i: int) -> str:
    b = stepper.branches[i]
    if not b.forced:
        return t("step.branch_main")
    at = b.part_step
    token = stepper.lm.token_texts[b.forced[at]] if stepper.lm is not None else str(b.forced[at])
    return t("step.branch_label", n=i, step=at + 1, token=visible(token))


def _decode_with(better, step_index):
    """Set the strategy widgets to the escape grid's best cell; the page replays the decode under them."""
    S["strategy"], S["temperature"], S["top_p"], S["min_p"] = "sample", better.temperature, better.top_p, better.min_p
    S["sbs_goto"] = step_index
    S["sbs_whole_page"] = True            # the strategy widgets are outside the stepper's fragment


# ---- the stepper: buttons, chart, numbers, text. Next, Back, branch and Play rerun only this part -------
playing = S.get("sbs_playing", False)
S.pop("sbs_whole_page", None)             # this run is the whole page


def _play_tick() -> bool:
    """Whether Play runs; on a tick of its timer, one step at Play's pace (the sleep here sets the pace), and at
    the end of the run Play stops and the whole page runs again to show the Play button."""
    playing = S.get("sbs_playing", False)
    if playing:
        time.sleep(max(0.0, S.get("sbs_last_tick", 0.0) + PLAY_STEP_SECONDS - time.monotonic()))
        S["sbs_last_tick"] = time.monotonic()
        if not stepper.next():
            S["sbs_playing"] = False
            rerun()
    return playing


def _controls(playing: bool) -> None:
    """First, Back, Next, Play and the step slider: callbacks that move the cursor before the panel is drawn."""
    # room for each label beside its icon and its shortcut hint ("⏮ Reset Home" is the widest): at 1280 px with
    # the sidebar open, a narrower first column showed "R… Home"
    cols = st.columns([1.8, 1.45, 1.45, 1.3, 2.6])
    cols[0].button(t("step.reset"), key="sbs_reset", icon="⏮", on_click=_do, args=("reset",), width="stretch",
                   help=t("step.reset_help"), disabled=recorded is not None, shortcut=shortcut("first"))
    cols[1].button(t("step.back"), key="sbs_back", icon="◀", on_click=_do, args=("back",), width="stretch",
                   disabled=stepper.cursor == 0, shortcut=shortcut("back"))
    cols[2].button(t("step.next"), key="sbs_next", icon="▶", on_click=_do, args=("next",), width="stretch",
                   type="primary", disabled=stepper.finished() and stepper.cursor + 1 >= len(stepper.steps()),
                   help=t("step.next_help"), shortcut=shortcut("next"))
    cols[3].button(t("step.pause") if playing else t("step.play"), key="sbs_play", icon="⏸" if playing else "⏯",
                   on_click=_toggle_play, width="stretch", help=t("step.play_help", seconds=f"{PLAY_STEP_SECONDS:g}"),
                   shortcut=shortcut("play"))
    total = len(stepper.steps())
    if total > 1:
        S["sbs_slider"] = stepper.cursor + 1
        cols[4].slider(t("step.slider"), 1, total, key="sbs_slider", on_change=_slider_moved)
    else:          # in a box as tall as the slider (ui.present's styles): the row does not grow at step 2
        cols[4].container(key="sbs_slider_one").caption(t("step.slider_one"))


FIGURES_KEPT = 4       # the step on screen, Next's and Back's sent ahead, and the one just left


def _figure(step, ahead: bool = False):
    """The candidates chart of a step, with its served badge on a served decode (above the chart too, unless
    the figure is sent `ahead` of its step).

    Built once per step, settings, language and page look in a session: the figure sent ahead for Next is
    the one the run after Next draws, and Back's was drawn a run before (each run would build three)."""
    badge = served_badge(recorded, step, shown=not ahead)
    key = (id(step), id(recorded), stepper.config, language(), presenting())
    kept = S.setdefault("sbs_figures", {})
    hit = kept.pop(key, None)
    if hit is None or hit[0] is not step or hit[1] is not recorded:      # ids are reused once objects are gone
        fig = candidates_figure(step, stepper.config, texts={
            "raw": t("step.fig_raw"), "shaped": t("step.fig_shaped"), "cut": t("step.fig_cut"),
            "cumulative": t("step.fig_cumulative"), "after_temperature": t("step.fig_after_temperature"),
            "threshold": t("step.fig_threshold"), "chosen": t("step.fig_chosen"),
            "x": t("step.fig_x"), "y": t("step.fig_y"), "y2": t("step.fig_y2"), "title": t("step.fig_title"),
            "title_chosen": t("step.fig_title_chosen"), "other": t("served.fig_other"),
            "other_hover": t("served.fig_other_hover")},
            other=other_mass(step) if served_facts(recorded) else None)
        hit = (step, recorded, with_badge(fig, badge))
    kept[key] = hit                   # the most recently used last
    while len(kept) > FIGURES_KEPT:
        kept.pop(next(iter(kept)))
    return hit[2]


def _step_chart(step, forced_here):
    """The candidates of this step beside its numbers; returns the figure (for export) and the chart's click."""
    config = stepper.config
    chart_col, facts_col = st.columns([3, 1])
    with chart_col:
        fig = _figure(step)
        event = main_chart(fig, "sbs_chart", on_select="rerun")
        st.caption(step_caption(step, config, forced_here))
    chosen = step.chosen
    with facts_col:
        unit = chosen_unit(UNCERTAINTY)            # the panel's nats / bits switch, below, sets these too
        st.metric(t("step.entropy"), f"{in_unit(step.entropy, unit):.3f} {unit_word(unit)}",
                  help=t("step.entropy_help"))
        if not math.isnan(step.varentropy):
            st.metric(t("step.varentropy"), f"{in_unit(step.varentropy, unit, 2):.3f} {unit_word(unit)}²",
                      help=t("step.varentropy_help"))
        if chosen is not None:
            st.metric(t("step.chosen_rank"), f"{chosen.rank}", help=t("step.chosen_rank_help"))
            st.metric(t("step.chosen_logprob"), f"{chosen.logprob:.3f}", help=t("step.chosen_logprob_help"))
        st.metric(t("step.kept"), f"{step.kept_count:,}", help=t("step.kept_help"))
    return fig, event


def _clicked_token(event, step) -> int | None:
    """The token of the bar a click chose, once per click: a click's selection stays in the chart's state."""
    points = event["selection"]["points"] if event else []       # a click comes once, on the run it caused
    if not points:
        return None
    data = points[0].get("customdata")
    token = data[0] if isinstance(data, list) else data
    if token is None and isinstance(points[0].get("x"), int | float):     # bars sit at x = 0, 1, ... by rank
        ranked = sorted(step.candidates, key=lambda c: c.rank)
        index = round(points[0]["x"])          # grouped bars are drawn a little off their x
        token = ranked[index].token_id if 0 <= index < len(ranked) else None
    if token is not None and S.get("sbs_last_pick") != (stepper.active, step.index, token):
        S["sbs_last_pick"] = (stepper.active, step.index, token)
        return int(token)
    return None


def _branch_controls(event, step) -> None:
    """Branch on another candidate, picked by a click on its bar or from the list; a new branch reruns the panel."""
    if not stepper.can_branch:
        if recorded is None:
            st.caption(t("step.branch_beam"))
        return
    picked = _clicked_token(event, step)
    options = [c.token_id for c in sorted(step.candidates, key=lambda c: c.rank)]
    labels = {c.token_id: f"{c.rank}. {visible(c.text)}  (p = {c.prob:.4f})" for c in step.candidates}
    bcols = st.columns([3, 1])
    choice = bcols[0].selectbox(t("step.branch_pick"), options, format_func=labels.get, key="sbs_branch_token",
                                help=t("step.branch_help"))
    if bcols[1].button(t("step.branch_button"), key="sbs_branch", icon="🌿", width="stretch"):
        picked = choice
    if picked is None:
        return
    before = len(stepper.branches)
    try:
        stepper.branch(picked)
    except DecodeScopeError as exc:
        st.error(engine_text(exc))
    else:
        if len(stepper.branches) == before and picked == step.chosen_ids[0]:
            st.info(t("step.branch_same"))
        _rerun_panel()


def _text(trace, branch, playing: bool) -> None:
    """The branches to switch between and the text so far, each token coloured by its probability or rank."""
    st.subheader(t("step.text_title"))

    if len(stepper.branches) > 1:
        S["sbs_active_branch"] = stepper.active
        st.radio(t("step.branches"), list(range(len(stepper.branches))), horizontal=True,
                 format_func=lambda i: for_markdown(branch_label(i)),    # radio labels render Markdown
                 key="sbs_active_branch", on_change=lambda: _do("switch", S["sbs_active_branch"]))
    colours = {m: t(f"step.colour_{m}") for m in ("prob", "rank")}      # labels in this run's language
    mode = st.radio(t("step.colour_by"), list(colours), horizontal=True, key="sbs_colour", format_func=colours.get)
    words = {"step": t("step.hover_step"), "rank": t("step.hover_rank"), "forced": t("step.hover_forced"),
             "parts": t("step.hover_parts"), "flagged": t("step.hover_flagged")}
    shown = [tok for tok in tokens_of(trace) if tok.step <= stepper.cursor]
    st.caption(f"{t('step.prompt_label')}: {for_markdown(trace.prompt)}")
    st.html(token_html(shown, mode=mode, mark_step=branch.part_step, current_step=stepper.cursor, words=words,
                       flagged=set() if playing else flagged_steps(trace)))
    st.html(legend_html(mode, {"low": t("step.legend_low"), "high": t("step.legend_high"),
                               "top1": t("step.legend_top1"), "top10": t("step.legend_top10"),
                               "top100": t("step.legend_top100"), "beyond": t("step.legend_beyond")}))
    if len(stepper.branches) > 1:
        with st.expander(t("step.all_branches"), expanded=True):
            for i, b in enumerate(stepper.branches):
                if i == stepper.active:
                    continue
                other = stepper.trace(i)
                st.markdown(f"**{for_markdown(branch_label(i))}**")
                st.html(token_html(tokens_of(other), mode=mode, mark_step=b.part_step, words=words))


def _panels(trace, fig) -> None:
    """The panels too slow for Play's ticks: the lens, what happened, the way out of a loop, and export."""
    render_uncertainty(trace, stepper.cursor, key=UNCERTAINTY)
    render_lens(stepper.lm, trace, stepper.cursor, key="sbs_lens")
    jump = render_what_happened(trace, key_prefix="sbs_wh")
    if jump is not None and jump != stepper.cursor:
        stepper.go(int(jump))
        _rerun_panel()
    render_escape(trace, key="sbs_escape", can_decode=recorded is None, on_decode=_decode_with, lm=stepper.lm)

    st.divider()
    export_bar(trace, fig, "step-by-step", key="sbs_export", lesson=True)


@st.fragment(run_every=PLAY_TIMER_SECONDS if playing else None)
def stepper_panel():
    """The step on screen and what moves it: Next, Back, a branch and Play's ticks rerun only this fragment."""
    if S.pop("sbs_whole_page", False):
        rerun()                        # Play, Pause or the loop-escape button: the page around changes too
    playing = _play_tick()
    if S.get("sbs_error"):
        st.error(S.pop("sbs_error"))
    sync_url(step=stepper.cursor + 1)        # a copied address opens on the step on screen
    _controls(playing)

    step = stepper.current
    branch = stepper.branches[stepper.active]
    fig, event = _step_chart(step, branch.forced.get(step.index))
    if not playing:                 # while Play runs, each tick draws only the chart, the numbers and the text
        render_stages(step, stepper.config, key="sbs_stages", uploaded=recorded is not None,
                      served=served_facts(recorded) is not None, inputs=step_inputs(stepper),
                      token_texts=stepper.lm.token_texts if stepper.lm is not None else None,
                      tokenize=stepper.lm.tokenize if stepper.lm is not None else None)
    _branch_controls(event, step)
    trace = stepper.trace()
    _text(trace, branch, playing)
    if playing:
        st.caption(t("step.playing_panels"))
    else:
        _panels(trace, fig)
    _look_ahead()
    _send_ahead(playing)


def _send_ahead(playing: bool) -> None:
    """The charts that Next and Back will show, sent now: the browser draws one the moment its button (or key) is
    pressed, and the run the press starts brings the rest of the step. None while Play runs."""
    for action, step in (("next", None if playing else stepper.upcoming()),
                         ("back", None if playing or stepper.cursor == 0 else stepper.steps()[stepper.cursor - 1])):
        ahead = _figure(step, ahead=True) if step is not None else None
        upcoming_chart(ahead, "sbs_chart", on=f".st-key-sbs_{action} button", action=action)


def _look_ahead() -> None:
    """With everything drawn, decode the next step on a copy while the reader reads: the next Next (or Play's
    next tick) then only moves the cursor, and the browser, sent the next step's chart now, draws it the moment
    Next is pressed. A failure here is left for that Next to report."""
    try:
        stepper.look_ahead()
    except DecodeScopeError:
        pass


stepper_panel()
