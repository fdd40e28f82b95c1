"""The interview page, presentation mode and the tour in Chromium, with screenshots to look at.

Screenshots land in artifacts/screenshots/: the interview page in English and in Chinese,
and presentation mode. Look at them for clipped Chinese text and missing glyphs (boxes).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from browser_helpers import act, assert_no_exception, open_page, screenshot, wait_idle

ROOT = Path(__file__).resolve().parents[2]


def texts(lang: str, section: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


def query(url: str) -> dict:
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(url).query))


def main_font_px(page) -> float:
    return page.evaluate("""() => parseFloat(getComputedStyle(
        document.querySelector('[data-testid="stMain"] [data-testid="stMarkdownContainer"] p')).fontSize)""")


def sidebar_open(page) -> bool:
    return page.evaluate("""() => {
        const bar = document.querySelector('[data-testid="stSidebar"]');
        return !!bar && bar.getAttribute('data-collapsed') === 'false' && bar.getBoundingClientRect().width > 50;
    }""")


def test_interview_in_both_languages(page, server):
    for lang in ("en", "zh"):
        interview = texts(lang, "interview")
        open_page(page, server, "interview", f"lang={lang}&tour=0")
        page.get_by_text(interview["short_heading"]).first.wait_for()
        assert_no_exception(page, server)
        assert page.get_by_role("heading", name=interview["title"]).count() == 1
        screenshot(page, f"interview_{lang}")
        page.get_by_role("tab", name=interview["tab_cards"]).click()
        page.get_by_text(interview["kind_scenario"]).first.wait_for()
        screenshot(page, f"interview_{lang}_cards")
    # the language stays when moving on through the sidebar menu: the page is drawn in it, and the address has it
    # once the run has ended (a run writes the address once, at its end)
    page.locator('[data-testid="stSidebarNav"] a', has_text=texts("zh", "nav")["kv_cache"]).click()
    page.get_by_role("heading", name=texts("zh", "kv")["title"]).wait_for()
    wait_idle(page)
    assert query(page.url).get("lang") == "zh"


def test_a_link_inside_a_session_opens_its_page_with_its_settings(page, server):
    interview = texts("en", "interview")
    open_page(page, server, "interview", "lang=en&tour=0&seed=3&max_new_tokens=30")
    act(page, lambda: page.get_by_text(interview["link_sample"]).click())
    page.get_by_role("heading", name=texts("en", "step")["title"]).wait_for()
    assert_no_exception(page, server)
    params = query(page.url)
    assert (params["strategy"], params["temperature"], params["top_p"]) == ("sample", "0.8", "0.9")
    assert (params["seed"], params["max_new_tokens"]) == ("7", "12")      # the link's, not the session's
    seed_box = page.locator('[data-testid="stSidebar"] [data-testid="stNumberInput"] input').first
    assert seed_box.input_value() == "7"


def test_presentation_mode_enlarges_text_and_folds_the_sidebar(page, server):
    open_page(page, server, "interview", "lang=zh&tour=0")
    page.get_by_text(texts("zh", "interview")["short_heading"]).first.wait_for()
    normal_px = main_font_px(page)
    assert sidebar_open(page)
    open_page(page, server, "interview", "lang=zh&present=1")
    page.get_by_text(texts("zh", "present")["exit"]).first.wait_for()
    assert main_font_px(page) > normal_px * 1.15
    assert not sidebar_open(page)
    # the tour is kept, folded into a button in the pinned corner rather than across the stage
    assert page.locator('[data-testid="stMain"] [class*="st-key-tour_box"]').count() == 0
    corner = page.locator('[class*="st-key-present_corner"]')
    corner.get_by_role("button", name=re.compile(texts("zh", "tour")["folded"].split(" ")[0])).click()  # opens, no run
    page.locator('[class*="st-key-tour_box"]').get_by_text(texts("zh", "tour")["distribution_title"]).wait_for()
    page.keyboard.press("Escape")
    screenshot(page, "interview_zh_present")
    open_page(page, server, "step_by_step", "lang=en&present=1&strategy=greedy")
    assert page.locator('[role="dialog"]').count() == 0          # a real address, not "page not found"
    page.get_by_role("heading", name=texts("en", "step")["title"]).wait_for()
    assert_no_exception(page, server)
    screenshot(page, "step_by_step_en_present")
    act(page, lambda: page.get_by_role("button", name=re.compile(re.escape(texts("en", "present")["exit"]))).click())
    assert query(page.url).get("present") == "0"
    assert main_font_px(page) < normal_px * 1.15


def test_the_tour_walks_five_steps_and_stays_closed(page, server):
    tour = texts("en", "tour")
    open_page(page, server, "interview", "lang=en")
    box = page.locator('[class*="st-key-tour_box"]')
    box.get_by_text(tour["distribution_title"]).wait_for()
    for name in ("choice", "tree", "embedding", "cache"):
        act(page, lambda: box.get_by_role("button", name=re.compile(tour["next"])).click())
        box.get_by_text(tour[f"{name}_title"]).wait_for()
    screenshot(page, "tour_last_step_en")
    act(page, lambda: box.get_by_role("button", name=re.compile(tour["finish"])).click())
    assert page.locator('[class*="st-key-tour_box"]').count() == 0
    assert query(page.url).get("tour") == "0"
    open_page(page, server, "interview", page.url.split("?", 1)[1])      # the same address again, in a new run
    assert page.locator('[class*="st-key-tour_box"]').count() == 0
