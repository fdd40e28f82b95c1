"""The uncertainty panel under a step: entropy and varentropy of every step of the run, and what they say."""
from __future__ import annotations

import math

import streamlit as st

from figures.uncertainty import BITS, uncertainty_strip
from ui.chart import show_figure
from ui.i18n import t
from ui.present import sized


def render_uncertainty(trace, cursor: int, key: str) -> None:
    """A folded panel: the strip over the steps so far, the step on screen marked, in nats or bits."""
    steps = [s for s in trace.steps if s.index <= max(cursor, 0)]
    if not steps or all(math.isnan(s.varentropy) for s in steps):
        return          # a served or an older trace: the whole distribution was never seen
    with st.expander(t("step.uncertainty_title")):
        unit = st.segmented_control(t("step.uncertainty_unit"), ["nats", "bits"], default="nats",
                                    key=f"{key}_unit") or "nats"
        labels = {"entropy": t("step.uncertainty_h"), "varentropy": t("step.uncertainty_v"),
                  "step": t("step.hover_step"), "title": t("step.uncertainty_chart")}
        show_figure(sized(uncertainty_strip(steps, cursor, labels, unit)), key=f"{key}_strip")
        step = steps[-1]
        scale = BITS if unit == "bits" else 1.0
        st.markdown(t("step.uncertainty_now", step=step.index + 1, h=f"{step.entropy / scale:.3f}",
                      v=f"{step.varentropy / scale ** 2:.3f}", unit=unit))
        st.caption(t("step.uncertainty_note"))
