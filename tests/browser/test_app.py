"""End to end in Chromium: what a user meets is the app in a browser, so test exactly that.

Expected values come from the engine run in this test process on the same bundled model
(an independent path: no Streamlit, no page code), compared with what the page shows.
"""
from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from browser_helpers import (MODEL_TIMEOUT_MS, TOKEN_SPANS, act, assert_no_exception, click_key,
                             new_context, open_page, running_server, screenshot, set_prompt, shown_tokens, upload,
                             wait_chart, wait_idle)
from engine import DecodeConfig, Trace
from engine import decode
from figures.labels import visible

pytestmark = pytest.mark.browser

def q(**values) -> str:
    return urlencode(values)


# ---- the first load, with its progress bar -------------------------------------------------
def test_first_load_shows_a_progress_bar_then_the_page(browser, tmp_path):
    """A cold start: an empty model cache makes the app de-quantise the bundled model (~15 s alone)."""

    cache = tmp_path / "cache"
    cache.mkdir()
    with running_server(tmp_path, {"DECODESCOPE_CACHE": str(cache)}) as srv:
        ctx = new_context(browser, srv)
        page = ctx.new_page()
        try:
            page.goto(f"{srv.url}/step_by_step", wait_until="domcontentloaded")
            bar = page.locator("[data-testid='stProgress']").first
            bar.wait_for(state="visible", timeout=MODEL_TIMEOUT_MS)
            text = page.locator("[data-testid='stProgress']").first.inner_text(timeout=MODEL_TIMEOUT_MS)
            screenshot(page, "first_load_progress")
            assert re.search(r"SmolLM2|first run|de-quantis|Loading", text), text
            wait_idle(page)
            wait_chart(page)
            assert page.locator("[data-testid='stProgress']").count() == 0
            assert_no_exception(page, srv)
            assert shown_tokens(page), "no generated token on the page after the first load"
            screenshot(page, "first_load_done")
        finally:
            ctx.close()
        assert any((p / "COMPLETE").is_file() for p in cache.iterdir()), "the first load wrote no cache"


# ---- a greedy decode and a step forward ---------------------------------------------------------
def test_greedy_decode_and_a_step_forward(page, server, bundled):
    prompt = "The capital of France is"
    open_page(page, server, "step_by_step", q(prompt=prompt, strategy="greedy", max_new_tokens=8))
    wait_chart(page)
    expected = decode(bundled, prompt, DecodeConfig(strategy="greedy", max_new_tokens=3))
    want = [visible(t) for s in expected.steps for t in s.chosen_texts[:1]]
    assert [t for _, t in shown_tokens(page)] == want[:1]
    click_key(page, "sbs_next")
    assert [t for _, t in shown_tokens(page)] == want[:2]
    click_key(page, "sbs_next")
    assert [t for _, t in shown_tokens(page)] == want[:3]
    click_key(page, "sbs_back")
    assert [t for _, t in shown_tokens(page)] == want[:2]       # back moves the cursor, the text shows up to it
    assert_no_exception(page, server)
    screenshot(page, "greedy_steps")


def test_next_redraws_the_chart_it_drew_and_a_click_on_a_bar_branches(page, server, bundled):
    """The main chart is one element from step to step (Next hands it the new figure), and a click on a
    bar still forces that candidate: the branch's text is the engine's own rank-3 candidate at step 2."""
    prompt = "The capital of France is"
    open_page(page, server, "step_by_step", q(prompt=prompt, strategy="greedy", max_new_tokens=6))
    wait_chart(page)
    expected = decode(bundled, prompt, DecodeConfig(strategy="greedy", max_new_tokens=2))
    first = visible(expected.steps[0].chosen_texts[0])
    third = sorted(expected.steps[1].candidates, key=lambda c: c.rank)[2]
    chart = '[class*="st-key-sbs_chart"] .js-plotly-plot'
    page.locator(chart).first.evaluate("el => { el.dataset.drewStep = '1'; }")
    click_key(page, "sbs_next")
    page.locator(f"{chart} .gtitle", has_text="Step 2").first.wait_for()
    assert page.locator(f'{chart}[data-drew-step="1"]').count() == 1       # the same element, redrawn
    bars = page.locator(f"{chart} .barlayer .trace").first.locator(".point")
    act(page, lambda: bars.nth(2).click(force=True))
    wanted = f"step 2: {visible(third.text)} ·"
    try:        # the branch's step, drawn by the click's run (which a busy server may start after a quiet second)
        page.wait_for_function("""([spans, wanted]) => [...document.querySelectorAll(spans)].some(
            (e) => e.title.startsWith(wanted) && e.title.includes('forced'))""", arg=[TOKEN_SPANS, wanted])
    except Exception:   # noqa: BLE001  the assertions below name what the page shows
        pass
    wait_idle(page)
    titles = page.locator(TOKEN_SPANS).evaluate_all("els => els.map(e => e.title)")
    assert titles[0].startswith(f"step 1: {first}"), titles
    assert any(t.startswith(wanted) and "forced" in t for t in titles), titles
    assert page.locator('[data-testid="stRadio"]').filter(has_text="branch 1").count() == 1
    assert_no_exception(page, server)
    screenshot(page, "branch_by_click")


def test_arrow_keys_step_and_are_ignored_while_typing(page, server, bundled):
    """A teacher steps with the keyboard: Right is Next, Left is Back, Home is Reset; keys typed
    into the prompt box stay there."""
    prompt = "The capital of France is"
    open_page(page, server, "step_by_step", q(prompt=prompt, strategy="greedy", max_new_tokens=8))
    wait_chart(page)
    expected = decode(bundled, prompt, DecodeConfig(strategy="greedy", max_new_tokens=3))
    want = [visible(s.chosen_texts[0]) for s in expected.steps]
    page.locator("h1").first.click()                       # focus on the page, not on a field
    for key, n in (("ArrowRight", 2), ("ArrowRight", 3), ("ArrowLeft", 2), ("Home", 1)):
        act(page, lambda key=key: page.keyboard.press(key))
        assert [t for _, t in shown_tokens(page)] == want[:n], key
    box = page.locator("[data-testid='stSidebar'] textarea").first
    box.click()
    box.press("End")
    page.keyboard.press("ArrowRight")
    page.keyboard.type("p")
    page.wait_for_timeout(1500)
    wait_idle(page)
    assert [t for _, t in shown_tokens(page)] == want[:1]
    assert box.input_value() == prompt + "p"
    assert_no_exception(page, server)


# ---- a beam tree appears -------------------------------------------------------------------------
def test_a_beam_tree_appears(page, server, bundled):
    prompt = "The capital of France is"
    open_page(page, server, "beam_tree", q(prompt=prompt, num_beams=3, max_new_tokens=4))
    wait_chart(page, ".st-key-beam_chart")
    expected = decode(bundled, prompt, DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=4))
    points = page.locator(".st-key-beam_chart .scatterlayer .point").count()
    assert points >= 1 + 2 * 3, f"only {points} points in the beam tree"
    svg_text = page.locator(".st-key-beam_chart .main-svg").first.text_content()
    first = expected.nodes[1].text
    assert visible(first).strip("␣") in svg_text
    assert_no_exception(page, server)
    screenshot(page, "beam_tree")


# ---- a share link reproduces the text ------------------------------------------------------------
def test_a_copied_share_link_gives_the_same_text_in_another_session(browser, server, page):
    open_page(page, server, "step_by_step", q(strategy="sample", seed=7, max_new_tokens=6))
    set_prompt(page, "Once upon a time, <b>a</b> fox & $x$")
    for _ in range(3):
        click_key(page, "sbs_next")
    first = shown_tokens(page)
    assert len(first) == 4
    # the "Copy link" popover holds the address; press its copy button, then read the clipboard
    # opening a popover is the browser's alone (no rerun): wait for its box, not for a run
    page.locator("[data-testid='stSidebar'] [data-testid='stPopover'] button").first.click()
    code = page.locator("[data-testid='stPopoverBody'] [data-testid='stCode'], [data-testid='stPopoverBody'] pre")
    code.first.wait_for(state="visible")
    link = code.first.inner_text().strip()
    try:
        code.first.hover()
        page.locator("[data-testid='stPopoverBody'] [data-testid='stCodeCopyButton']").first.click(timeout=5000)
        copied = page.evaluate("navigator.clipboard.readText()")
        if copied:
            link = copied.strip()
    except Exception:   # noqa: BLE001 - no clipboard in this Chromium: the text of the box is the same link
        pass
    assert link.startswith(server.url) and "prompt=" in link and "seed=7" in link and "step=4" in link, link

    other = new_context(browser, server)
    try:
        page2 = other.new_page()
        page2.goto(link, wait_until="domcontentloaded")
        wait_idle(page2)
        page2.locator(TOKEN_SPANS).first.wait_for()
        assert shown_tokens(page2) == first          # the link opens on the step it was copied at
        # the sidebar's text box may be drawn a moment after the tokens; wait for its value, do not sample it once
        expect(page2.locator("[data-testid='stSidebar'] .st-key-prompt textarea").first).to_have_value(
            "Once upon a time, <b>a</b> fox & $x$", timeout=MODEL_TIMEOUT_MS)
        assert_no_exception(page2, server)
    finally:
        other.close()


# ---- JSON download and upload ----------------------------------------------------------------------
def test_a_json_download_and_its_upload(page, server, browser, tmp_path):

    open_page(page, server, "step_by_step", q(prompt="Water boils at", strategy="greedy", max_new_tokens=6))
    click_key(page, "sbs_next")
    click_key(page, "sbs_next")
    shown = shown_tokens(page)
    with page.expect_download() as info:
        page.locator(".st-key-sbs_export_trace_json button").first.click()
    path = tmp_path / "trace.json"
    info.value.save_as(path)
    trace = Trace.from_json(path.read_bytes())
    assert trace.prompt == "Water boils at"
    assert [visible(s.chosen_texts[0]) for s in trace.steps] == [t for _, t in shown]
    # beside it, the same run as a lesson file (built on the click): its data holds the trace's steps
    with page.expect_download() as info:
        page.locator(".st-key-sbs_export_lesson_html button").first.click()
    lesson = info.value.path().read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="lesson-data">(.*?)</script>', lesson, re.S).group(1))
    assert info.value.suggested_filename.endswith(".html") and data["lang"] == "en"
    assert [s["chosen_text"] for s in data["view"]["steps"]] == [s.chosen_texts[0] for s in trace.steps]

    other = new_context(browser, server)
    try:
        page2 = other.new_page()
        open_page(page2, server, "step_by_step")
        viewing = page2.get_by_text("Viewing a recorded trace")
        upload(page2, "sbs_upload", path, shows=viewing)
        assert viewing.count() >= 1
        # a recorded trace opens at its first step; step through it to its end
        for _ in range(len(trace.steps) - 1):
            click_key(page2, "sbs_next")
        assert shown_tokens(page2) == shown
        assert_no_exception(page2, server)
        screenshot(page2, "uploaded_trace")
    finally:
        other.close()
