"""A long prompt is read in parts before the first step; the pages that wait for that step show a bar counting
the prompt's tokens (Step by step's opening and a replay under new settings, Compare's lanes in their progress
box), and a click on Stop while the prompt is read keeps the run, ended at its first step."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import ui.progress
from app_helpers import ROOT
from engine.decoding import prefill

pytestmark = [pytest.mark.apptest, pytest.mark.usefixtures("navigation_frame")]
PROMPT = "the cat sat on the mat " * 3
PART = 16


@pytest.fixture
def bar_words(monkeypatch):
    """Parts of PART tokens; every (tokens read, prompt length) the page put on a bar, in order."""
    monkeypatch.setattr(prefill, "PREFILL_TOKENS", PART)
    drawn, real = [], ui.progress.reading_text

    def spy(read, total, started):
        drawn.append((read, total))
        return real(read, total, started)

    monkeypatch.setattr(ui.progress, "reading_text", spy)
    return drawn


def parts_of(length: int) -> list:
    """What a bar shows for a prompt of `length` tokens: 0 before the first part, then each part's end."""
    return [(n, length) for n in [0, *range(PART, length, PART), length]]


def open_page(page: str, state: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in {"prompt": PROMPT, "max_new_tokens": 3, **state}.items():
        at.session_state[key] = value
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def test_step_by_step_counts_the_prompt_as_it_reads_it_then_again_for_a_replay(tiny_loads, bar_words):
    length = len(tiny_loads.tokenizer(PROMPT)["input_ids"])
    assert length > 2 * PART
    at = open_page("step_by_step", {})
    assert bar_words == parts_of(length)
    assert not at.get("progress")                     # the bar is gone once the first step is on screen
    bar_words.clear()
    at.session_state["strategy"] = "sample"           # new settings: the decode is replayed from the prompt
    at.run()
    assert not at.exception, at.exception
    assert bar_words == parts_of(length)


def test_compare_counts_the_prompt_in_its_progress_box(tiny_loads, bar_words):
    length = len(tiny_loads.tokenizer(PROMPT)["input_ids"])
    at = open_page("compare", {"cmp_lanes": ["greedy", "temperature"]})
    assert bar_words == parts_of(length)              # the lanes share one read of the prompt
    assert not at.get("progress")


def stop_while_the_prompt_is_read(root: str) -> None:
    """Compare's lanes on a tiny model; the bar's second redraw meets a click (Streamlit raises StopException
    at the run's next element update)."""
    import sys

    sys.path[:0] = [root, f"{root}/tests"]
    import streamlit as st
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    import ui.progress as progress
    from engine import DecodeConfig
    from engine.decoding import prefill
    from tiny_models import tiny_llama

    lm = tiny_llama(seed=1)
    lm.eos_token_ids = ()
    prefill.PREFILL_TOKENS, real = 16, progress.reading_text
    shown = st.session_state["shown"] = []

    def words(read, total, started):
        shown.append(read)
        if len(shown) == 2:
            raise StopException()
        return real(read, total, started)

    progress.reading_text = words
    try:
        progress.watched_lanes("cmp", lm, "the cat sat on the mat " * 3,
                               [DecodeConfig(max_new_tokens=8), DecodeConfig(max_new_tokens=8, strategy="sample")],
                               ["greedy", "sample"])
    finally:
        prefill.PREFILL_TOKENS, progress.reading_text = 512, real
        st.session_state["flights"] = list(st.session_state.get(progress._FLIGHTS, []))


def test_stop_while_the_prompt_is_read_keeps_each_lane_at_its_first_step():
    at = AppTest.from_function(stop_while_the_prompt_is_read, kwargs=dict(root=str(ROOT)), default_timeout=120)
    at.run()
    assert at.session_state["shown"][:2] == [0, 16]       # stopped at the bar's second redraw
    flight, = at.session_state["flights"]
    assert flight.stopped and flight.done.is_set()
    assert [len(trace.steps) for trace in flight.partial] == [1, 1]   # not 8: the decode ended at its first step
