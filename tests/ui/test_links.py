"""A link sets everything it names, also when it points at the page already on screen."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("navigation_frame")


def test_tour_link_to_the_page_on_screen_sets_strategy_and_top_p(tiny_llama_folder):
    from ui.tour import STEPS, tour_link_params

    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = folder
    at.switch_page("pages/step_by_step.py").run()
    at.session_state["max_new_tokens"] = 4
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["strategy"] == "greedy"
    name, page, settings = STEPS[1]                   # "The choice": sampling with top-p 0.9
    assert page == "step_by_step" and settings["strategy"] == "sample"
    # what the browser sends for the link: the page again, with the link's query string
    for key, value in tour_link_params(settings).items():
        at.query_params[key] = value
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    assert at.session_state["strategy"] == "sample"
    assert at.session_state["top_p"] == 0.9 and at.session_state["temperature"] == 1.0
    assert at.session_state["max_new_tokens"] == 12           # the link's length, not the one typed before
    assert at.slider(key="top_p").value == 0.9


def test_moving_a_widget_is_not_mistaken_for_a_link(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = folder
    at.session_state["max_new_tokens"] = 4
    at.switch_page("pages/step_by_step.py").run()
    at.session_state["strategy"] = "sample"
    at.run()
    at.slider(key="temperature").set_value(0.7).run()
    at.slider(key="top_p").set_value(0.5).run()
    assert not at.exception, at.exception
    assert at.session_state["temperature"] == 0.7 and at.session_state["top_p"] == 0.5
    assert at.session_state["strategy"] == "sample"


def test_heavy_pages_open_with_a_short_decode_and_the_light_one_with_the_usual(tiny_llama_folder):
    _, folder = tiny_llama_folder
    for page, length in (("kv_cache", 12), ("compare", 12), ("step_by_step", 24)):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.session_state["model"] = folder
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
        assert at.sidebar.number_input(key="max_new_tokens").value == length, page
        assert at.query_params["max_new_tokens"] == [str(length)] or at.query_params["max_new_tokens"] == str(length)
