"""The uncertainty panel under a step: entropy and varentropy of every step of the run, and what they say."""
from __future__ import annotations

import math

import streamlit as st

from figures.uncertainty import BITS, uncertainty_strip
from ui.chart import show_figure
from ui.i18n import t
from ui.present import sized


UNITS = ("nats", "bits")


def chosen_unit(key: str) -> str:
    """The unit the panel's switch (widget `key`_unit) is on, 'nats' until it is switched: read at the run's start,
    so the numbers drawn above the panel follow it in the same run."""
    unit = st.session_state.get(f"{key}_unit")
    return unit if unit in UNITS else "nats"


def in_unit(value: float, unit: str, power: int = 1) -> float:
    """An entropy (power 1) or a varentropy (power 2) measured in nats, in `unit`."""
    return value / (BITS if unit == "bits" else 1.0) ** power


def unit_word(unit: str) -> str:
    return t(f"step.unit_{unit}")


def render_uncertainty(trace, cursor: int, key: str) -> None:
    """A folded panel: the strip over the steps so far, the step on screen marked, in nats or bits."""
    steps = [s for s in trace.steps if s.index <= max(cursor, 0)]
    if not steps or all(math.isnan(s.varentropy) for s in steps):
        return          # a served or an older trace: the whole distribution was never seen
    with st.expander(t("step.uncertainty_title")):
        unit = st.segmented_control(t("step.uncertainty_unit"), list(UNITS), default="nats", key=f"{key}_unit",
                                    format_func=unit_word) or "nats"
        labels = {"entropy": t("step.uncertainty_h"), "varentropy": t("step.uncertainty_v"),
                  "step": t("step.hover_step"), "title": t("step.uncertainty_chart")}
        show_figure(sized(uncertainty_strip(steps, cursor, labels, unit, unit_word(unit))), key=f"{key}_strip")
        step = steps[-1]
        st.markdown(t("step.uncertainty_now", step=step.index + 1, h=f"{in_unit(step.entropy, unit):.3f}",
                      v=f"{in_unit(step.varentropy, unit, 2):.3f}", unit=unit_word(unit)))
        st.caption(t("step.uncertainty_note"))
