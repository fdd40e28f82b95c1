"""The step a link opens on, reached in view: Step-by-step opened on step 1,024 decodes 1,024 steps before it can
show one (109 s on a shared two-core server). They are decoded one at a time under a progress bar with a Stop
button; the cursor follows, so a click (Stop, or any other) ends the run between two steps and the next run
shows the steps decoded so far, on the last of them."""
from __future__ import annotations

import time

import streamlit as st

from engine.decoding.stepper import Stepper
from ui.i18n import t
from ui.progress import STOP_BRIDGE

REDRAW_SECONDS = 0.25        # the bar is redrawn at most this often (each redraw is a message to the browser)


def replay_to(stepper: Stepper, step: int) -> None:
    """Put the cursor on `step` (0-based), decoding the steps before it with a progress bar and Stop."""
    target = step + 1
    if len(stepper.steps()) >= target or stepper.finished():
        stepper.go(step)
        return
    box = st.empty()
    with box.container(border=True):
        st.html(STOP_BRIDGE, unsafe_allow_javascript=True)
        bar = st.progress(0.0, text=t("step.replaying", step=f"{target:,}", done="0"))
        st.button(t("common.stop"), key="_stop_button_replay", icon="⏹")   # a click ends this run: see above
    drawn = time.monotonic()
    while True:
        done = len(stepper.steps())
        if done >= target or stepper.finished():
            break
        stepper.go(done)                        # one forward pass: step `done`, the cursor on it
        if time.monotonic() - drawn >= REDRAW_SECONDS:
            drawn = time.monotonic()
            bar.progress(done / target, text=t("step.replaying", step=f"{target:,}", done=f"{done + 1:,}"))
    stepper.go(step)
    box.empty()
