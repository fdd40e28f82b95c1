"""A phone (390x844, touch) in Chromium: the landing, Step by step and the Interview page fit the screen's width
(nothing scrolls sideways, no text is cut at the edge), Step by step's candidate chart keeps its labels clear of
each other (a narrow plot shows every k-th), and its buttons are on the screen and step the decode.

Screenshots in artifacts/screenshots/phone_*.png."""
from __future__ import annotations

import pytest

from browser_helpers import ROOT, RUN_OBSERVER, STEP_TIMEOUT_MS, act, assert_no_exception, open_page, \
    screenshot, wait_idle

PHONE = {"width": 390, "height": 844}

# how far the page reaches past the window's right edge, and the texts cut by a box that hides its overflow
# (code blocks scroll by design, and a chart's own boxes are its business)
WIDTH = """() => ({page: document.documentElement.scrollWidth, window: window.innerWidth,
    main: (m => m.scrollWidth - m.clientWidth)(document.querySelector('[data-testid="stMain"]')),
    cut: [...document.querySelectorAll('[data-testid="stMain"] *')].filter(e =>
        e.textContent.trim() && !e.closest('pre, code, .js-plotly-plot, [data-testid="stCode"]')
        && ['hidden', 'clip'].includes(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1)
        .map(e => e.textContent.trim().slice(0, 60))})"""
# pairs of tick labels of one axis of one chart whose boxes overlap
OVERLAPS = """() => { const out = [];
  document.querySelectorAll('.js-plotly-plot').forEach((plot, n) => {
    for (const axis of ['.xtick text', '.ytick text', '.y2tick text']) {
      const ticks = [...plot.querySelectorAll(axis)].map(e => [e.textContent, e.getBoundingClientRect()])
        .filter(([, b]) => b.width > 0);
      ticks.forEach(([ta, a], i) => ticks.slice(i + 1).forEach(([tb, b]) => {
        if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
          out.push([n, ta, tb]); })); } });
  return out; }"""


@pytest.fixture(scope="module")
def phone(browser, server):
    """A phone's browser: its width, touch, a phone's user agent."""
    ctx = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, locale="en-US",
                              user_agent="Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148")
    ctx.set_default_timeout(STEP_TIMEOUT_MS)
    ctx.add_init_script(RUN_OBSERVER)
    yield ctx
    ctx.close()


@pytest.fixture
def tab(phone):
    page = phone.new_page()
    yield page
    page.close()


def fits(page, name: str) -> None:
    width = page.evaluate(WIDTH)
    shot = screenshot(page, f"phone_{name}")
    assert width["page"] <= width["window"] and width["main"] <= 0, (width, shot)
    assert not width["cut"], (width["cut"], shot)


def test_the_landing_fits_a_phone(tab, server):
    tab.goto(f"{server.url}/?tour=0", wait_until="domcontentloaded")
    wait_idle(tab)
    assert_no_exception(tab, server)
    links = tab.locator('[data-testid="stMain"] a')
    pages = len(list((ROOT / "pages").glob("*.py")))
    links.nth(pages - 1).wait_for(state="attached", timeout=30_000)   # a loaded machine may still be drawing the list
    assert links.count() >= pages                                             # every page described
    fits(tab, "landing")


def test_step_by_step_steps_on_a_phone_with_legible_labels(tab, server):
    open_page(tab, server, "step_by_step", "tour=0&max_new_tokens=6")
    assert_no_exception(tab, server)
    chart = tab.locator('[class*="st-key-sbs_chart"] .js-plotly-plot').first
    for step in range(3):
        chart.locator(".xtick text").first.wait_for()
        tab.wait_for_timeout(300)            # a narrow plot thins its labels right after drawing them
        assert not tab.evaluate(OVERLAPS), (step, tab.evaluate(OVERLAPS), screenshot(tab, "phone_step_overlap"))
        assert chart.locator(".xtick text").count() >= 3                      # thinned, not emptied
        fits(tab, f"step_by_step_{step + 1}")
        button = tab.locator(".st-key-sbs_next button:visible").first
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] and box["height"] >= 40, box
        act(tab, lambda tapped=button: tapped.tap())
    title = chart.locator(".gtitle").first.text_content()
    assert title.startswith("Step 4"), title                                 # three taps, three steps


def test_the_interview_page_fits_a_phone(tab, server):
    open_page(tab, server, "interview", "tour=0")
    assert_no_exception(tab, server)
    fits(tab, "interview")
