"""Page: feed back e = p^T E (or a Gumbel-softmax sample) instead of a token id, next to a discrete lane."""
import math

import streamlit as st

from engine import DecodeConfig
from engine.inside.embedding import feedback_cost, gumbel_sweep, soft_lane
from engine.service import shared_service
from engine.tokens import first_difference
from figures.embedding import lane_lines, neighbour_bars, projection_scatter, tau_curve
from figures.labels import duration, for_markdown, one_line, visible
from ui.chart import show_figure
from ui.i18n import t
from ui.page import open_page, shared_model
from ui.present import main_chart, scroll_to_section, sized
from ui.results import cached
from ui.settings import TAUS, bounds, read, sync_url
from ui.soft_inputs import soft_inputs_section


page = open_page("embedding")
row, slot, settings = page.row, page.slot, page.settings
lm = shared_model(settings)



# ---- controls --------------------------------------------------------------------------
c1, c2 = row["settings"].columns(2)
modes = ("greedy", "sample")
saved = read("ee_discrete")
discrete_mode = c1.radio(t("embedding.discrete"), modes, horizontal=True, key="ee_discrete",
                         index=modes.index(saved) if saved in modes else 0,
                         format_func=lambda m: t("embedding.mode_" + m))
temperature = c2.slider(t("embedding.temperature"), *bounds("ee_temperature"), step=0.05, key="ee_temperature",
                        value=read("ee_temperature"), help=t("embedding.temperature_help"))
sync_url(ee_discrete=discrete_mode, ee_temperature=temperature)
base = DecodeConfig(max_new_tokens=settings.max_new_tokens, seed=settings.seed, chat=settings.chat,
                    temperature=temperature, top_n=10)
discrete_config = base.replace(strategy=discrete_mode)
soft_config = base.replace(strategy="soft")

with st.spinner(t("embedding.running")):
    discrete = cached("ee_discrete_trace", (lm.name, settings.prompt, discrete_config),
                      lambda: shared_service().decode(lm, settings.prompt, discrete_config))
    soft, projections = cached("ee_soft", (lm.name, settings.prompt, soft_config),
                               lambda: soft_lane(lm, settings.prompt, soft_config), shared_on=lm)

# ---- the two lanes -------------------------------------------------------------------------
discrete_ids = [s.chosen_ids[0] for s in discrete.steps]
soft_ids = [s.feedback.argmax_id for s in soft.steps if s.feedback is not None]
split = first_difference(discrete_ids, soft_ids)
st.subheader(t("embedding.lanes_header"))
st.markdown(t("embedding.lanes_texts", mode=t("embedding.mode_" + discrete_mode),
              discrete=one_line(lm.tokenizer.decode(discrete_ids, skip_special_tokens=True)),
              soft=one_line(lm.tokenizer.decode(soft_ids, skip_special_tokens=True))))
if split is None:
    st.success(t("embedding.no_split", n=len(soft_ids)))
elif split < min(len(discrete_ids), len(soft_ids)):
    st.warning(t("embedding.split", step=split + 1,
                 discrete=for_markdown(visible(discrete.steps[split].chosen_texts[0])),
                 soft=for_markdown(visible(soft.steps[split].feedback.argmax_text))))
else:
    st.warning(t("embedding.split_length", step=split + 1))

lane_labels = {"cosine": t("embedding.nearest_cosine"), "entropy": t("embedding.entropy"),
               "step": t("embedding.step"), "difference": t("embedding.difference"),
               "title": t("embedding.lane_title")}
main_chart(lane_lines(soft.steps, lane_labels, split), "ee_lane_chart", slot)

steps_with_feedback = [s for s in soft.steps if s.feedback is not None]


def soft_step() -> int:
    """One soft step: its numbers, its nearest words and weights, its projection. Returns the step's position
    among the steps with feedback (the Gumbel lane below shows the same one)."""
    st.subheader(t("embedding.step_header"))
    start = split if split is not None and split < len(steps_with_feedback) else 0   # open where the lanes part
    # the slider counts steps from 1, like every page; `index` is the 0-based position in the list
    index = st.slider(t("embedding.step"), 1, len(steps_with_feedback), value=start + 1, key="ee_step") - 1 \
        if len(steps_with_feedback) > 1 else 0
    step = steps_with_feedback[index]
    fb = step.feedback
    cols = st.columns(4)
    cols[0].metric(t("embedding.nearest_cosine"), f"{fb.nearest_cosine:.3f}", help=t("embedding.nearest_cosine_help"))
    cols[1].metric(t("embedding.entropy"), f"{fb.entropy:.3f}",
                   help=t("embedding.entropy_help", max=f"{math.log(lm.facts.vocab_size):.2f}"))
    cols[2].metric(t("embedding.argmax"), visible(fb.argmax_text))
    cols[3].metric(t("embedding.norms"), f"{fb.norm:.3f} / {fb.nearest_norm:.3f}", help=t("embedding.norms_help"))
    left, right = st.columns(2)
    show_figure(sized(neighbour_bars(fb.nearest, t("embedding.cosine"),
                                     t("embedding.nearest_title", step=step.index + 1),
                                     highlight_id=fb.argmax_id, range_max=1.0)), key="ee_nearest_chart", where=left)
    show_figure(sized(neighbour_bars(fb.weights, t("embedding.weight"),
                                     t("embedding.weights_title", step=step.index + 1),
                                     highlight_id=fb.argmax_id, range_max=1.0)), key="ee_weights_chart", where=right)
    projection = next((p for p in projections if p.step == step.index), None)
    if projection is not None:
        proj_labels = {k: t("embedding." + k) for k in ("nearest", "heavy", "cosine", "weight", "e", "pc1", "pc2")}
        proj_labels["title"] = t("embedding.projection_title", step=step.index + 1)
        show_figure(sized(projection_scatter(projection, proj_labels)), key="ee_projection_chart")
        st.caption(t("embedding.projection_caption", explained=f"{100 * projection.explained:.0f}"))
    return index


def gumbel_lane(index: int) -> None:
    """Gumbel-softmax at the chosen tau: the lane's step `index`, its text, and the tau sweep."""
    st.subheader(t("embedding.gumbel_header"), anchor="gumbel")
    scroll_to_section("gumbel")            # a link that names this section lands here, not at the top
    st.markdown(t("embedding.gumbel_intro"))
    g1, g2 = st.columns(2)
    tau = g1.select_slider("tau", list(TAUS[::-1]), value=read("ee_tau"),
                           key="ee_tau", help=t("embedding.tau_help"))
    hard = g2.toggle(t("embedding.hard"), value=read("ee_hard"), key="ee_hard",
                     help=t("embedding.hard_help"))
    sync_url(ee_tau=tau, ee_hard=hard)
    gumbel_config = base.replace(strategy="gumbel", tau=float(tau), hard=bool(hard))
    with st.spinner(t("embedding.running")):
        gumbel, _ = cached("ee_gumbel", (lm.name, settings.prompt, gumbel_config),
                           lambda: soft_lane(lm, settings.prompt, gumbel_config), shared_on=lm)
        sweep = cached("ee_sweep", (lm.name, settings.prompt, settings.chat, settings.seed, temperature),
                       lambda: gumbel_sweep(lm, settings.prompt, list(TAUS), seed=settings.seed,
                                            temperature=temperature, chat=settings.chat), shared_on=lm)
    g_steps = [s for s in gumbel.steps if s.feedback is not None]
    g_step = g_steps[min(index, len(g_steps) - 1)] if g_steps else None
    if g_step is not None:
        gl, gr = st.columns(2)
        show_figure(sized(neighbour_bars(g_step.feedback.weights, t("embedding.weight"),
                                         t("embedding.gumbel_weights_title", step=g_step.index + 1),
                                         highlight_id=g_step.feedback.argmax_id, range_max=1.0)),
                    key="ee_gumbel_weights", where=gl)
        show_figure(sized(neighbour_bars(g_step.feedback.nearest, t("embedding.cosine"),
                                         t("embedding.gumbel_nearest_title", step=g_step.index + 1),
                                         highlight_id=g_step.feedback.argmax_id, range_max=1.0)),
                    key="ee_gumbel_nearest", where=gr)
        st.markdown(t("embedding.gumbel_text", text=one_line(gumbel.best.text)))
    tau_labels = {"top_weight": t("embedding.top_weight"), "title": t("embedding.tau_title")}
    show_figure(sized(tau_curve(sweep, tau_labels, current=float(tau))), key="ee_tau_chart")
    st.markdown(t("embedding.tau_summary", high=f"{sweep[0].tau:g}", high_w=f"{sweep[0].top_weight:.3f}",
                  low=f"{sweep[-1].tau:g}", low_w=f"{sweep[-1].top_weight:.4f}",
                  token=for_markdown(visible(sweep[-1].top[0].text))))


# the soft step's slider and the Gumbel settings rerun only this part of the page
@st.fragment
def step_and_gumbel():
    gumbel_lane(soft_step())


step_and_gumbel()

# ---- cost ----------------------------------------------------------------------------------------
st.subheader(t("embedding.cost_header"))
cost = cached("ee_cost", (lm.name,), lambda: feedback_cost(lm), shared_on=lm)
forward = [s.seconds for s in soft.steps[1:]] or [soft.steps[0].seconds]
forward_ms = 1000 * sorted(forward)[len(forward) // 2]
cols = st.columns(4)
cols[0].metric(t("embedding.cost_madds"), f"{cost.mixture_multiply_adds:,}",
               help=t("embedding.cost_madds_help", vocab=f"{cost.vocab_size:,}", hidden=f"{cost.hidden_size:,}"))
cols[1].metric(t("embedding.cost_p"), f"{cost.p_bytes / 1024:,.0f} KiB", help=t("embedding.cost_p_help"))
cols[2].metric(t("embedding.cost_mixture_time"), duration(cost.mixture_seconds))
cols[3].metric(t("embedding.cost_lookup_time"), duration(cost.lookup_seconds))
st.markdown(t("embedding.cost_text", vocab=f"{cost.vocab_size:,}", hidden=f"{cost.hidden_size:,}",
              madds=f"{cost.mixture_multiply_adds:,}", read=f"{cost.mixture_bytes_read / 1e6:,.1f}",
              lookup=f"{cost.lookup_bytes_read:,}",
              ratio=f"{cost.mixture_seconds / max(cost.lookup_seconds, 1e-12):,.0f}",
              step_ms=f"{forward_ms:,.1f}", share=f"{100 * cost.mixture_seconds / max(forward_ms / 1000, 1e-12):.1f}",
              repeats=cost.repeats))

# ---- notes ------------------------------------------------------------------------------------------
st.subheader(t("embedding.notes_header"))
d_kv, s_kv = discrete.steps[-1].kv, soft.steps[-1].kv
mean_cos = sum(s.feedback.nearest_cosine for s in steps_with_feedback) / len(steps_with_feedback)
st.markdown(t("embedding.note_state", soft_rows=s_kv.rows, soft_steps=len(soft.steps), discrete_rows=d_kv.rows,
              discrete_steps=len(discrete.steps)))
st.markdown(t("embedding.note_input", mean=f"{mean_cos:.3f}",
              low=f"{min(s.feedback.nearest_cosine for s in steps_with_feedback):.3f}"))

# ---- 2025's feed-back rules: Soft Thinking, Mixture of Inputs, the hidden state, the multi-token mean -----------
soft_inputs_section(lm, settings, temperature)
