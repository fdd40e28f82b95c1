"""Page: the same prompt and seed through several strategies, lane by lane."""
import streamlit as st

from engine import DecodeScopeError
from engine.tokens import first_difference
from figures.compare import coinciding, lanes_figure, token_ids
from figures.labels import for_markdown
from engine.budget import SOFT_WIDTH, step_budget, tokens_within_budget
from ui.export import export_bar
from ui.engine_words import engine_text
from ui.i18n import t
from ui.page import open_page
from ui.present import main_chart, stage
from ui.progress import held, stopped_note, watched_decode, watched_lanes
from ui.results import keep_or_stop
from ui.settings import DEFAULT_LANES, LANES, bounds, read, rerun, sync_url
from ui.shared_model import get_lm
from ui.sidebar import LIGHT_NEW_TOKENS, model_facts_panel
from ui.strategy import make_config
from ui.token_view import legend_html, token_html, tokens_of
from ui.what_happened import flagged_steps, render_what_happened

S = st.session_state
LANE_WIDTH = {"soft": SOFT_WIDTH}  # paths a lane decodes (engine/budget.py); a beam lane: its number of beams


# several decodes per run: open short; the figure's slot comes after the lane choice below
page = open_page("compare", new_tokens=LIGHT_NEW_TOKENS, copy_link=True, slot=False, weights=True,
                 upload="cmp_upload")
row, settings, uploaded = page.row, page.settings, page.uploaded

# ---- which lanes, with which parameters -------------------------------------------------------
if "cmp_lanes" not in S:
    S["cmp_lanes"] = read("lanes") or list(DEFAULT_LANES)
slot = stage()
chosen = row["settings"].multiselect(t("compare.lanes"), LANES, key="cmp_lanes",
                                     format_func=lambda x: t(f"compare.lane_{x}"), help=t("compare.lanes_help"))
with row["settings"].expander(t("compare.lane_settings")):
    cols = st.columns(4)
    top_k = cols[0].number_input(t("step.top_k"), *bounds("cmp_top_k"), key="cmp_top_k", value=read("cmp_top_k"))
    top_p = cols[1].slider(t("step.top_p"), *bounds("cmp_top_p"), step=0.05, key="cmp_top_p", value=read("cmp_top_p"))
    temperature = cols[2].slider(t("step.temperature"), *bounds("cmp_temperature"), step=0.1, key="cmp_temperature",
                                 value=read("cmp_temperature"))
    beams = cols[3].slider(t("step.num_beams"), *bounds("cmp_beams"), key="cmp_beams", value=read("cmp_beams"))
sync_url(lanes=",".join(chosen), cmp_top_k=top_k, cmp_top_p=top_p, cmp_temperature=temperature, cmp_beams=beams)
LANE_SETTINGS = {
    "greedy": dict(strategy="greedy"),
    "beam": dict(strategy="beam", num_beams=beams),
    "top_k": dict(strategy="sample", top_k=top_k),
    "top_p": dict(strategy="sample", top_p=top_p),
    "temperature": dict(strategy="sample", temperature=temperature),
    "soft": dict(strategy="soft"),
}


def lane_tokens(lanes: list, asked: int) -> int:
    """New tokens per lane so that all lanes together stay within the step budget."""
    width = sum(beams if lane == "beam" else LANE_WIDTH.get(lane, 1) for lane in lanes)
    return tokens_within_budget(width, asked)


def lane_name(lane: str) -> str:
    return t(f"compare.name_{lane}", k=top_k, p=f"{top_p:g}", temp=f"{temperature:g}", beams=beams)


# ---- run the lanes (each result cached per session) --------------------------------------------
lanes = []          # (key, display name, trace)
if chosen or uploaded is not None:
    lm = None
    if chosen:
        lm = get_lm(settings.model)
        if lm is None:
            st.stop()
        model_facts_panel(lm.facts)
    last_good = S.setdefault("cmp_last_good", {})     # lane -> its last trace, kept on screen when inputs go bad
    needed = list(chosen)
    if "greedy" not in needed and needed:
        needed.append("greedy")          # the reference every lane is compared with
    new_tokens = lane_tokens(needed, settings.max_new_tokens)
    if new_tokens < settings.max_new_tokens:
        st.info(t("compare.capped", n=new_tokens, asked=settings.max_new_tokens, lanes=len(needed),
                  budget=f"{step_budget():,}"))
    configs = {}
    for lane in needed:
        try:
            configs[lane] = make_config(settings, {"top_n": 20}, max_new_tokens=new_tokens,
                                        **LANE_SETTINGS[lane]).validate(lm.facts.vocab_size)
        except DecodeScopeError as exc:
            if lane in last_good:
                keep_or_stop(exc, have_previous=True)
            else:
                st.error(f"{for_markdown(lane_name(lane))}: {engine_text(exc)}")
    # the non-beam lanes in one batch (one prefill, a shared KV prefix); the beam lane on its own, through
    # the same service as Beam tree, so a search either page has run is answered from memory
    batch = [lane for lane in configs if configs[lane].strategy != "beam"]
    decoded = {}
    try:
        if batch:
            traces = watched_lanes("cmp_lanes", lm, settings.prompt, [configs[x] for x in batch],
                                   [lane_name(x) for x in batch])
            decoded.update(zip(batch, traces))
        if "beam" in configs and not held("cmp_lanes"):     # Stop stops the page: no search after it
            decoded["beam"] = watched_decode("cmp_beam", lm, settings.prompt, configs["beam"], lane_name("beam"))
    except DecodeScopeError as exc:
        keep_or_stop(exc, have_previous=bool(last_good))
    for lane in needed:
        if lane in decoded:
            last_good[lane] = decoded[lane]
            lanes.append((lane, lane_name(lane), decoded[lane]))
        elif lane in last_good and not held("cmp_lanes"):    # an older result, for settings that went bad
            lanes.append((lane, lane_name(lane), last_good[lane]))
    stopped_note("cmp_lanes")
    stopped_note("cmp_beam")
    if uploaded is not None:
        lanes.append(("uploaded", t("compare.name_uploaded", strategy=uploaded.config.strategy), uploaded))
else:
    st.info(t("compare.pick_one"))
    st.stop()

greedy = next((tr for key, _, tr in lanes if key == "greedy"), None)
shown = [(key, name, tr) for key, name, tr in lanes if key in chosen or key == "uploaded"]
parts = {name: (first_difference(token_ids(greedy), token_ids(tr)) if greedy is not None and key != "greedy" else None)
         for key, name, tr in shown}

longest = max((len(tr.steps) for _, _, tr in shown), default=1)
highlight = None
if "cmp_step_pending" in S:            # a jump asked for by the "What happened?" panel
    S["cmp_step"] = S.pop("cmp_step_pending")
if longest > 1:
    if S.get("cmp_step", 1) > longest:
        S["cmp_step"] = longest
    highlight = st.slider(t("compare.highlight"), 1, longest, key="cmp_step", help=t("compare.highlight_help")) - 1

for names in coinciding([(name, tr) for _, name, tr in shown]):
    st.info(t("compare.coincide", lanes=" · ".join(for_markdown(n) for n in names),
              n=len(token_ids(next(tr for _, name, tr in shown if name == names[0])))))
fig = lanes_figure([(name, tr) for _, name, tr in shown], parts, highlight_step=highlight, texts={
    "title": t("compare.fig_title"), "x": t("compare.fig_x"), "y": t("compare.fig_y"), "parts": t("compare.fig_parts")})
main_chart(fig, "cmp_chart", slot)

mode = st.radio(t("step.colour_by"), ["prob", "rank"], horizontal=True, key="cmp_colour",
                format_func=lambda m: t(f"step.colour_{m}"))
words = {"step": t("step.hover_step"), "rank": t("step.hover_rank"), "forced": t("step.hover_forced"),
         "parts": t("compare.hover_parts"), "flagged": t("step.hover_flagged")}
st.html(legend_html(mode, {"low": t("step.legend_low"), "high": t("step.legend_high"), "top1": t("step.legend_top1"),
                           "top10": t("step.legend_top10"), "top100": t("step.legend_top100"),
                           "beyond": t("step.legend_beyond")}))
for key, name, tr in shown:
    with st.container(border=True, key=f"cmp_lane_{key}"):
        steps = [s for s in tr.steps]
        entropy = sum(s.entropy for s in steps) / len(steps) if steps else float("nan")
        part = parts.get(name)
        if key == "greedy":
            part_text = t("compare.is_reference")
        elif greedy is None:
            part_text = t("compare.no_reference")
        elif part is None:
            part_text = t("compare.same_as_greedy")
        else:
            part_text = t("compare.parts_at", step=part + 1)
        st.markdown(f"**{for_markdown(name)}** · {t('compare.total_logprob')} **{tr.best.cum_logprob:.2f}** · "
                    f"{t('compare.mean_entropy')} **{entropy:.2f}** {t('step.unit_nats')} · {part_text}")
        st.html(token_html(tokens_of(tr), mode=mode, mark_step=part, current_step=highlight, words=words,
                           flagged=flagged_steps(tr)))
        if key == "beam":
            st.caption(t("compare.beam_note"))

# ---- what happened for one lane, share and export ------------------------
if shown:
    names = [name for _, name, _ in shown]
    focus = st.selectbox(t("compare.explain_lane"), names, key="cmp_explain_lane")
    focus_trace = next(tr for _, name, tr in shown if name == focus)
    jump = render_what_happened(focus_trace, key_prefix="cmp_wh")
    if jump is not None and longest > 1 and jump + 1 != S.get("cmp_step"):
        S["cmp_step_pending"] = min(max(int(jump) + 1, 1), longest)
        rerun()

st.divider()
focus_name = st.selectbox(t("compare.export_lane"), [name for _, name, _ in shown], key="cmp_export_lane")
export_trace = next((tr for _, name, tr in shown if name == focus_name), None)
export_bar(export_trace, fig, "compare", key="cmp_export")
