"""Presentation mode and the guided tour, in AppTest on the interview page (no model needed)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
INTERVIEW = "pages/interview.py"
STYLE_MARK = "<style>"


def texts(lang: str, section: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


TOUR, PRESENT = texts("en", "tour"), texts("en", "present")


pytestmark = pytest.mark.usefixtures("navigation_frame")


def open_interview(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update(query)
    at.switch_page(INTERVIEW).run()
    assert not at.exception, at.exception
    return at


def stylesheet_on(at: AppTest) -> bool:
    from ui.present import STYLESHEET
    return any(m.value == STYLESHEET.strip() for m in at.markdown)


def tour_heading(at: AppTest) -> str | None:
    box = [m.value for m in at.markdown if TOUR["heading"].split("{")[0] in m.value]
    return box[0] if box else None


# ---- presentation mode -------------------------------------------------------------------
def test_present_in_the_url_turns_presentation_mode_on():
    at = open_interview(present="1")
    assert at.sidebar.toggle(key="present").value is True
    assert stylesheet_on(at)
    assert at.button(key="present_exit").label == PRESENT["exit"]
    # the tour stays, folded into a button pinned to the corner, not across the top of the stage
    assert tour_heading(at)
    assert at.get("popover")[0].proto.popover.label == texts("en", "tour")["folded"].format(step=1, total=5)
    at.button(key="present_exit").click().run()
    assert at.query_params["present"] == "0"
    assert at.sidebar.toggle(key="present").value is False
    assert not stylesheet_on(at)


def test_the_sidebar_switch_turns_it_on_and_keeps_it_in_the_url():
    at = open_interview(tour="0")
    assert not stylesheet_on(at)
    at.sidebar.toggle(key="present").set_value(True).run()
    assert at.query_params["present"] == "1"
    assert stylesheet_on(at)
    # the stylesheet is the constant one: no page text goes through unsafe HTML
    from ui.present import STYLESHEET
    from ui.present import BASE_STYLESHEET
    assert [m.value for m in at.markdown if STYLE_MARK in m.value] == [BASE_STYLESHEET.strip(), STYLESHEET.strip()]


def test_links_carry_presentation_mode_to_the_next_page():
    at = open_interview(present="1")
    from urllib.parse import parse_qsl
    links = [dict(parse_qsl(link.proto.query_string)) for link in at.get("page_link")]
    assert links and all(params.get("present") == "1" for params in links)


# ---- the guided tour -----------------------------------------------------------------------
def test_the_tour_walks_five_steps_then_stays_closed():
    at = open_interview()
    names = ("distribution", "choice", "tree", "embedding", "cache")
    for number, name in enumerate(names, start=1):
        heading = tour_heading(at)
        assert heading and TOUR["heading"].format(step=number, total=5) in heading and TOUR[f"{name}_title"] in heading
        if number < len(names):
            at.button(key="tour_next").click().run()
    at.button(key="tour_back").click().run()
    assert TOUR["embedding_title"] in tour_heading(at)
    at.button(key="tour_next").click().run()
    at.button(key="tour_finish").click().run()
    assert tour_heading(at) is None
    assert at.query_params["tour"] == "0"
    at.run()
    assert tour_heading(at) is None


def test_each_tour_step_opens_its_page():
    at = open_interview(lang="zh")
    from urllib.parse import parse_qsl
    from streamlit.util import calc_hash

    expected = ("step_by_step", "step_by_step", "beam_tree", "expected_embedding", "kv_cache")
    for number, page in enumerate(expected, start=1):
        link = at.get("page_link")[0]                       # the tour box comes first on the page
        params = dict(parse_qsl(link.proto.query_string))
        assert link.proto.page_script_hash == calc_hash(page), (number, link.proto.page)
        assert params["lang"] == "zh" and params["prompt"]
        if number < len(expected):
            at.button(key="tour_next").click().run()


def test_closing_the_tour_hides_it_and_tour_0_never_shows_it():
    at = open_interview()
    assert tour_heading(at)
    at.button(key="tour_close").click().run()
    assert tour_heading(at) is None and at.query_params["tour"] == "0"
    assert tour_heading(open_interview(tour="0")) is None


@pytest.mark.parametrize("page", ["kv_cache", "answers"])
def test_labels_inside_bars_stay_legible_on_a_projector(tiny_loads, page):
    """Plotly shrinks a label to fit its bar, to 9 px on the projector (Whole answers allowed 9, the KV cache's
    counts had no floor): in presentation mode no label inside a bar is drawn under 14 px; one that does not
    fit at that size is left to the hover."""
    from app_helpers import figures, open_app
    from ui.present import BAR_LABEL_MIN

    at = open_app(page, params={"present": 1, "wa_depth": 3, "wa_budget": 24, "wa_branch": 3, "wa_samples": 8})
    labelled = [spec for spec in figures(at)
                if any(trace.get("type") == "bar" and trace.get("text") is not None for trace in spec["data"])]
    assert labelled, page
    for spec in labelled:
        shrink = spec["layout"].get("uniformtext", {})
        assert shrink.get("minsize", 0) >= BAR_LABEL_MIN == 14 and shrink.get("mode") == "hide", shrink
