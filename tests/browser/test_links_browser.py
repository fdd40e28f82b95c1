"""Links in Chromium: a link sets everything it names, also on the page already open, and a link to a
section lands on that section."""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from browser_helpers import SCREENSHOTS, act, assert_no_exception, open_page, screenshot

ROOT = Path(__file__).resolve().parents[2]


def texts(section: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / "en" / f"{section}.json").read_text(encoding="utf-8"))


def test_show_me_on_the_page_already_open_sets_the_strategy_too(page, server):
    tour = texts("tour")
    open_page(page, server, "step_by_step", "lang=en&strategy=greedy&max_new_tokens=4")
    box = page.locator('[class*="st-key-tour_box"]')
    act(page, lambda: box.get_by_role("button", name=re.compile(tour["next"])).click())
    box.get_by_text(tour["choice_title"]).wait_for()
    act(page, lambda: box.get_by_text(tour["open"].format(page=texts("nav")["step_by_step"])).click())
    assert_no_exception(page, server)
    params = dict(parse_qsl(urlsplit(page.url).query))
    assert (params["strategy"], params["top_p"]) == ("sample", "0.9")
    page.screenshot(path=str(SCREENSHOTS / "tour_show_me_same_page.png"))
    # the page and its widgets follow: top-p at 0.90 cuts the tail (greedy cuts nothing), the length is the link's
    assert "0.90" in page.locator(".st-key-top_p").inner_text()
    page.locator('[class*="st-key-sbs_chart"] .legendtext', has_text=texts("step")["fig_cut"]).first.wait_for()
    length = page.locator('[data-testid="stSidebar"] .st-key-max_new_tokens input')
    assert length.input_value() == "12"
    # each thing the user does still has its own history entry (ui/history.py merges only the writes no click
    # or key asked for): Next adds one
    entries = page.evaluate("history.length")
    act(page, lambda: page.locator(".st-key-sbs_next button").first.click())
    assert page.evaluate("history.length") == entries + 1


def test_the_gumbel_link_lands_on_the_gumbel_section(page, server):
    interview = texts("interview")
    page.set_viewport_size({"width": 1400, "height": 900})
    open_page(page, server, "interview", "lang=en&tour=0")
    act(page, lambda: page.get_by_text(interview["link_gumbel"]).click())
    heading = page.locator("#gumbel")
    heading.wait_for()
    page.wait_for_timeout(3000)           # the page scrolls once its figures above have drawn
    top = heading.evaluate("el => el.getBoundingClientRect().top")
    assert 0 <= top <= 900 - 150, top          # on the first screen, with room for the section below it
    assert "section" not in dict(parse_qsl(urlsplit(page.url).query))     # asked once, then dropped
    page.screenshot(path=str(SCREENSHOTS / "gumbel_link_landing.png"))
    # one press of Back from the demo is the Interview again (the page's own address writes after the link,
    # and before its decode, join the link's history entry: Back took three presses)
    assert urlsplit(page.url).path == "/expected_embedding"
    act(page, lambda: page.go_back())
    assert urlsplit(page.url).path == "/interview", page.url
    assert_no_exception(page, server)


def test_back_and_forward_to_an_address_beyond_every_range_keep_the_page_whole(page, server):
    """Back and Forward change the address under widgets that already hold values (ui.url_memory.follow_link):
    a value outside a widget's range, not finite or with hundreds of digits must be held or refused there
    too, and a text with bytes that are not UTF-8 must be shown, not raise. Reference: ui.settings.TABLE."""
    from ui.settings import TABLE

    open_page(page, server, "beam_tree", "lang=en&num_beams=3&max_new_tokens=3&rerank_lp=1.0")
    wild = "&".join(f"{key}={value}" for key, value in
                    [("num_beams", "9" * 300), ("rerank_lp", "1e400"), ("seed", "nan"), ("max_new_tokens", "-7"),
                     ("top_n", "5000"), ("prompt", "caf%ED%A0%80s")])
    # an entry of the browser's own, as an address typed in the bar makes (the page's pushState merges writes
    # that no click or key asked for into the entry before them: ui/history.py)
    page.evaluate(f"(window.__dsPushState || history.pushState.bind(history))"
                  f"(null, '', location.pathname + '?lang=en&{wild}')")
    act(page, lambda: page.go_back())
    act(page, lambda: page.go_forward())          # the browser leaves the address; Streamlit reruns on it
    assert_no_exception(page, server)
    sidebar = page.locator('[data-testid="stSidebar"]')
    assert int(sidebar.locator(".st-key-max_new_tokens input").input_value()) >= TABLE["max_new_tokens"].low
    beams = page.locator(".st-key-num_beams input[type=range]").first
    assert int(beams.get_attribute("value")) <= TABLE["num_beams"].high
    screenshot(page, "back_forward_wild_address")
