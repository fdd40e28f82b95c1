"""Stop, and a page switch, in the middle of a long decode, in Chromium.

The server starts the run a click asks for at once, in a new thread, while the run it interrupts is
still decoding: only a real server and browser show what the user then sees. Each test opens a
request no other test makes (its own prompt), so no result is answered from memory.

References: the decode's own length as its progress box states it before Stop (Stop must leave a
result well short of it), and the values written into the link.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

from browser_helpers import MODEL_TIMEOUT_MS, assert_no_exception, screenshot, wait_idle

ROOT = Path(__file__).resolve().parents[2]
OTHER_SESSION = "Another session"
# records, from the moment it is installed, whether the "another session" notice is ever on the page, and
# when the stopped note first shows (milliseconds on the page's clock)
WATCH_PAGE = """([other, note]) => { window.__dsOther = false; window.__dsNoteAt = null;
    setInterval(() => { const main = document.querySelector('[data-testid="stMain"]');
        const text = main ? main.innerText : '';
        if (text.includes(other)) window.__dsOther = true;
        if (window.__dsNoteAt === null && text.includes(note)) window.__dsNoteAt = performance.now(); }, 50); }"""


def texts(section: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / "en" / f"{section}.json").read_text(encoding="utf-8"))


def wait_for_progress(page, at_least: float) -> int:
    """Wait until the decode's progress bar (the one with a Stop button: a model loading shows a bar too) shows
    `at_least` of the work done; the decode's length in steps (all lanes together), as the box states it."""
    page.wait_for_function(
        """(need) => { const stop = document.querySelector('[class*="st-key-_stop_button_"]');
                       const bar = document.querySelector('[data-testid="stProgress"] [role="progressbar"]');
                       return stop && bar && Number(bar.getAttribute('aria-valuenow')) >= need; }""",
        arg=at_least * 100, timeout=MODEL_TIMEOUT_MS, polling=50)
    lines = page.inner_text('[data-testid="stMain"]')           # "label · done/total · text so far", per lane
    return sum(int(total) for total in re.findall(r"·\s*\d+/(\d+)\s*·", lines))


def press_stop(page) -> float | None:
    """Click Stop and wait until the app is idle; the seconds from the click to the stopped note (measured,
    not judged), None when the note never showed."""
    page.evaluate(WATCH_PAGE, [OTHER_SESSION, texts("common")["stopped_note"]])
    clicked = page.evaluate("performance.now()")
    stop_button(page).first.click()
    wait_idle(page)
    shown = page.evaluate("window.__dsNoteAt")
    return None if shown is None else (shown - clicked) / 1000


def streamlits_stop(page):
    """Streamlit's own Stop, in the toolbar's status corner while a run is going."""
    return page.locator('[data-testid="stStatusWidget"] button')


def stop_button(page):
    """The decode's own Stop button (Streamlit's "Stop" in the corner ends the run instead, with no rerun)."""
    return page.locator('[class*="st-key-_stop_button_"] button')


def slider(page, key: str):
    return page.locator(f".st-key-{key} input[type=range]").first


def slider_max(page, key: str) -> int:
    return int(slider(page, key).get_attribute("max"))


def test_stop_at_a_fifth_of_a_beam_search_leaves_the_tree_so_far(page, server):
    page.goto(f"{server.url}/beam_tree?num_beams=5&max_new_tokens=70&prompt={quote('Stop a tree of five beams')}",
              wait_until="domcontentloaded")
    total = wait_for_progress(page, 0.2)
    seconds = press_stop(page)
    assert_no_exception(page, server)
    shot = screenshot(page, "stop_beam_tree_after")
    print(f"beam tree: Stop at 20 % of {total} steps, stopped note after {seconds} s ({shot})")
    assert not page.evaluate("window.__dsOther"), "the page said another session was decoding"
    assert seconds is not None, "no stopped note"
    kept = slider_max(page, "beam_upto")
    print(f"beam tree: {kept} of {total} steps kept")
    assert total == 70 and kept < total      # the tree stopped short (a loaded machine may decode a few steps more)


def test_streamlits_own_stop_in_a_long_beam_search_leaves_the_tree_so_far(page, server):
    """The Stop users see first, the toolbar's, in a search of 8 beams and 120 tokens: the decode ends, the page
    shows the steps decoded so far with the stopped note, and goes idle (the seconds are measured and printed)."""
    page.goto(f"{server.url}/beam_tree?num_beams=8&max_new_tokens=120&tour=0&prompt={quote('Stop from the corner')}",
              wait_until="domcontentloaded")
    total = wait_for_progress(page, 0.1)
    page.evaluate(WATCH_PAGE, [OTHER_SESSION, texts("common")["stopped_note"]])
    clicked = page.evaluate("performance.now()")
    streamlits_stop(page).first.click()
    wait_idle(page)
    idle = (page.evaluate("window.__dsChanged") - clicked) / 1000
    shown = page.evaluate("window.__dsNoteAt")
    assert_no_exception(page, server)
    shot = screenshot(page, "stop_streamlit_beam_tree_after")
    print(f"beam tree, Streamlit's Stop at 10 % of {total} steps: stopped note after "
          f"{None if shown is None else round((shown - clicked) / 1000, 2)} s, idle after {idle:.2f} s ({shot})")
    assert shown is not None, "no stopped note: the steps decoded so far were not shown"
    kept = slider_max(page, "beam_upto")
    assert kept < total == 120, (kept, total)
    assert not page.evaluate("window.__dsOther"), "the page said another session was decoding"


def test_stop_early_on_compare_leaves_the_lanes_so_far(page, server):
    page.goto(f"{server.url}/compare?lanes=greedy,top_p,soft&max_new_tokens=200&prompt={quote('Stop three lanes')}",
              wait_until="domcontentloaded")
    total = wait_for_progress(page, 0.05)
    seconds = press_stop(page)
    assert_no_exception(page, server)
    print(f"compare: Stop at 5 % of {total} steps, stopped note after {seconds} s")
    assert not page.evaluate("window.__dsOther"), "the page said another session was decoding"
    assert seconds is not None, "no stopped note"
    kept = slider_max(page, "cmp_step")
    print(f"compare: {kept} of 200 steps per lane kept")
    assert total == 3 * 200 and kept < 200


def test_a_link_survives_a_page_switch_in_the_middle_of_its_first_decode(page, server):
    prompt = "A link shared in class"
    page.goto(f"{server.url}/beam_tree?num_beams=5&max_new_tokens=60&prompt={quote(prompt)}",
              wait_until="domcontentloaded")
    wait_for_progress(page, 0.05)
    nav = texts("nav")
    page.locator('[data-testid="stSidebarNav"] a', has_text=nav["compare"]).click()
    page.locator(".st-key-cmp_lanes").wait_for()          # Compare's run has drawn the sidebar and its settings
    sidebar = page.locator('[data-testid="stSidebar"]')
    assert sidebar.locator("textarea").first.input_value() == prompt
    assert sidebar.locator(".st-key-max_new_tokens input").input_value() == "60"
    page.locator('[data-testid="stSidebarNav"] a', has_text=nav["beam_tree"]).click()
    slider(page, "num_beams").wait_for(state="attached")
    assert slider(page, "num_beams").get_attribute("value") == "5"
    assert sidebar.locator("textarea").first.input_value() == prompt
    stop = stop_button(page)
    if stop.count():                                      # leave the server idle for the next test
        stop.first.click()
    wait_idle(page)
