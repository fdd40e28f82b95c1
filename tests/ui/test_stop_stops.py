"""Stop on Beam tree and Compare, the way the server handles the click.

On a click the server does not wait for the run in progress: it tells that run to stop (every later
element update or session-state access of that run raises) and starts the next run at once. Here the
click is made by hand inside the running decode: Stop's callback, then the server's stop request.
The next run must show the steps decoded before Stop, with the stopped note, and no notice that
another session is decoding.

Reference: the engine's own decode of the same request (no page, no service), cut at the step where
Stop was pressed.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.testing.v1 import AppTest

from engine import decode
from ui import progress

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
STOP_AT = 3                          # steps decoded (all lanes together) when Stop is pressed


@pytest.fixture
def click_stop(monkeypatch):
    """click_stop(name): the decode drawn under `name` is stopped the way a click on its Stop button stops it."""
    draw = progress._Watch._draw
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)

    def arm(name: str) -> None:
        def clicked(self, fraction, left):
            if self.name == name and sum(self.done) == STOP_AT:
                progress._stop(name)                             # the button's callback
                get_script_run_ctx().script_requests.request_stop()   # the server stops the old run
            draw(self, fraction, left)
        monkeypatch.setattr(progress._Watch, "_draw", clicked)

    arm.release = lambda: monkeypatch.setattr(progress._Watch, "_draw", draw)
    return arm


def open_app(folder: str, prompt: str, state: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = prompt               # a request no other test has kept
    for key, value in state.items():
        at.session_state[key] = value
    return at


def no_other_session(at: AppTest) -> None:
    assert not any("Another session" in i.value for i in at.info), [i.value for i in at.info]


def stopped(at: AppTest) -> bool:
    return any("Stopped" in w.value for w in at.warning)


def test_stop_on_beam_tree_shows_the_steps_decoded_before_it(tiny_llama_folder, click_stop):
    lm, folder = tiny_llama_folder
    at = open_app(folder, "Stop the tree " * 3, {"max_new_tokens": 9, "num_beams": 3})
    click_stop("beam")
    at.switch_page("pages/beam_tree.py").run()           # the run Stop interrupts
    click_stop.release()
    at.run()                                             # the run the click started
    assert not at.exception, at.exception
    trace = at.session_state["beam_trace"]
    alone = decode(lm, trace.prompt, trace.config)
    assert len(alone.steps) > STOP_AT                    # the whole search is longer than what was kept
    assert [s.chosen_ids for s in trace.steps] == [s.chosen_ids for s in alone.steps[:STOP_AT]]
    assert stopped(at)
    no_other_session(at)


def test_stop_on_compare_keeps_the_lanes_and_starts_no_search(tiny_llama_folder, click_stop):
    lm, folder = tiny_llama_folder
    at = open_app(folder, "Stop the lanes " * 3, {"max_new_tokens": 8, "cmp_lanes": ["greedy", "top_p", "beam"],
                                                  "cmp_beams": 2})
    click_stop("cmp_lanes")
    at.switch_page("pages/compare.py").run()
    click_stop.release()
    at.run()
    assert not at.exception, at.exception
    shown = at.session_state["cmp_last_good"]
    assert set(shown) == {"greedy", "top_p"}             # the beam lane was not searched after Stop
    greedy = shown["greedy"]
    alone = decode(lm, greedy.prompt, greedy.config)
    assert 0 < len(greedy.steps) < len(alone.steps)
    assert [s.chosen_ids for s in greedy.steps] == [s.chosen_ids for s in alone.steps[:len(greedy.steps)]]
    assert all(len(tr.steps) == len(greedy.steps) for tr in shown.values())   # one batch: the lanes stop together
    assert stopped(at)
    no_other_session(at)


def test_streamlits_own_stop_keeps_the_steps_for_the_next_run(tiny_llama_folder, monkeypatch):
    """Streamlit's Stop (the toolbar's) makes the server stop the run, with no callback and no run after it: the
    next run, whenever it comes, shows the steps decoded before the Stop, with the stopped note."""
    lm, folder = tiny_llama_folder
    draw = progress._Watch._draw
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0.0)     # every step draws: the Stop is seen at the next one

    def stopped_here(self, fraction, left):
        if self.name == "beam" and sum(self.done) == STOP_AT:
            get_script_run_ctx().script_requests.request_stop()
        draw(self, fraction, left)

    monkeypatch.setattr(progress._Watch, "_draw", stopped_here)
    at = open_app(folder, "Stop from the toolbar " * 2, {"max_new_tokens": 9, "num_beams": 3})
    at.switch_page("pages/beam_tree.py").run()           # the run Streamlit's Stop ends
    monkeypatch.setattr(progress._Watch, "_draw", draw)
    at.run()                                             # the next run (any click)
    assert not at.exception, at.exception
    trace = at.session_state["beam_trace"]
    alone = decode(lm, trace.prompt, trace.config)
    kept = len(trace.steps)             # the run ends at its next element update after the Stop (a redraw or two)
    assert STOP_AT <= kept < len(alone.steps)
    assert [s.chosen_ids for s in trace.steps] == [s.chosen_ids for s in alone.steps[:kept]]
    assert stopped(at)
    no_other_session(at)
