"""A Step-by-step link on a far step: the steps before it are decoded under a progress bar with Stop, and a click
during the replay keeps the steps decoded so far with the cursor on the last of them."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import ROOT, texts

pytestmark = pytest.mark.apptest


def replay_clicked_at_the_fourth_redraw(root: str) -> None:
    """A page that replays a tiny model's decode to step 30 (0-based 29); the fourth redraw of the bar meets a
    click (Streamlit stops a run at its next element update, raising StopException there)."""
    import sys

    sys.path[:0] = [root, f"{root}/tests"]
    import streamlit as st
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    import ui.replay as replay
    from engine import DecodeConfig
    from engine.decoding.stepper import Stepper
    from tiny_models import tiny_llama

    lm = tiny_llama(seed=1)
    lm.eos_token_ids = ()                       # every step is decoded: no end before step 30
    stepper = st.session_state["stepper"] = Stepper(lm, "The capital of", DecodeConfig(max_new_tokens=40))
    drawn = st.session_state["drawn"] = []
    real_t, real_pause = replay.t, replay.REDRAW_SECONDS

    def text(key, **values):
        if key == "step.replaying" and values["done"] != "0":
            drawn.append((values["done"], len(stepper.steps())))
            if len(drawn) == 4:
                raise StopException()
        return real_t(key, **values)

    replay.t, replay.REDRAW_SECONDS = text, 0.0
    try:
        replay.replay_to(stepper, 29)
    finally:
        replay.t, replay.REDRAW_SECONDS = real_t, real_pause


def test_a_click_during_the_replay_keeps_the_steps_decoded_so_far():
    at = AppTest.from_function(replay_clicked_at_the_fourth_redraw, kwargs=dict(root=str(ROOT)), default_timeout=120)
    at.run()
    stepper, drawn = at.session_state["stepper"], at.session_state["drawn"]
    # each redraw counts the steps decoded: the bar said 2, 3, 4, 5 of 30 (the first step came with the decode)
    assert drawn == [("2", 2), ("3", 3), ("4", 4), ("5", 5)]
    assert len(stepper.steps()) == 5 and stepper.cursor == 4       # nothing lost, the cursor on the last one


def test_a_link_on_step_9_opens_there(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in {"model": folder, "step": "9", "max_new_tokens": "12", "strategy": "greedy"}.items():
        at.query_params[key] = value
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    assert at.slider(key="sbs_slider").value == 9 and at.query_params["step"] == "9"
    assert not any(texts("step")["replaying"].split("{")[0] in (p.text or "") for p in at.get("progress"))
