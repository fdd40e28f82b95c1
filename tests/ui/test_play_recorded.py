"""Play on Step by step advances a trace that is only viewed: one uploaded from a file, and one a
server decoded. AppTest runs no timers: each tick of Play's timer is one run here.

References: the step captions are those of traces built here by hand (an uploaded trace) or of the
completion the stand-in server answers with (a served trace), read from the values written in
tests/trace_builders.py and below.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from trace_builders import hand_made_trace  # noqa: E402

from served_fixtures import TWO_TOKENS  # noqa: E402

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
COMPLETION = TWO_TOKENS        # the stand-in server's one answer (tests/served_fixtures.py)


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption).replace("\\", "")


def open_step_page(folder: str, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in (params or {}).items():
        at.query_params[key] = str(value)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["max_new_tokens"] = 2
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    return at


def press_play(at: AppTest) -> None:
    """Press Play: its run starts the timer, and the timer's first tick comes within the same click."""
    at.button(key="sbs_play").click().run()
    assert not at.exception, at.exception


def test_play_advances_an_uploaded_trace_to_its_end(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_step_page(folder)
    at.file_uploader(key="sbs_upload").set_value(
        ("t.json", hand_made_trace().to_json().encode(), "application/json")).run()
    assert "p = 0.500" in captions(at)                  # the first step
    press_play(at)
    assert "p = 0.250" in captions(at)                  # the second step
    assert at.button(key="sbs_play").label == "Pause"
    at.run()                                            # a tick: the third step
    assert "p = 0.125" in captions(at)
    at.run()                                            # nothing left: Play turns itself off
    assert at.button(key="sbs_play").label == "Play" and "p = 0.125" in captions(at)
    at.button(key="sbs_play").click().run()             # Play on the last step plays the trace again
    assert "p = 0.125" not in captions(at)


def test_play_advances_a_served_trace(tiny_llama_folder, stub_server):
    _, folder = tiny_llama_folder
    url = stub_server(COMPLETION)
    at = open_step_page(folder, {"server": url})
    at.sidebar.text_input(key="server").set_value(url).run()
    at.sidebar.button(key="served_connect").click().run()
    assert not at.exception, at.exception
    first, second = f"p = {math.exp(-0.5):.4f}", f"p = {math.exp(-1.2):.4f}"
    assert first in captions(at) and second not in captions(at)
    press_play(at)
    assert second in captions(at)
