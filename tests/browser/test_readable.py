"""Readability in Chromium: the legend never sits on the chart title and keeps to two rows (English and
中文, with top-p), and figure text (ticks, titles, legends, notes on lines) and captions reach a contrast of at
least 4.5:1 against the page, with and without presentation mode (the beam tree's node labels and the notes on
other pages' charts: test_stage_browser.py, on the pages it opens in presentation mode)."""
from __future__ import annotations

import pytest

from browser_helpers import SCREENSHOTS, PagePool, assert_no_exception, open_page
from contrast import contrast, page_background, rgb, text_colours

QUERY = "strategy=sample&top_p=0.9&temperature=0.7&max_new_tokens=3&tour=0"
PROJECTOR = (1280, 720)


@pytest.fixture(scope="module")
def pool(shared_context, server):
    """Step by step with top-p, opened once per language and mode: the legend, contrast, toolbar and focus
    tests only look at it."""
    pages = PagePool(shared_context, server)
    yield pages
    pages.close()


def step_by_step(pool, lang: str = "en", present: str = "0"):
    return pool.get("step_by_step", f"{QUERY}&lang={lang}&present={present}", PROJECTOR)


@pytest.mark.parametrize("lang,present", [("en", "0"), ("zh", "0"), ("en", "1"), ("zh", "1")])
def test_legend_stays_clear_of_the_title(pool, server, lang, present):
    page = step_by_step(pool, lang, present)
    assert_no_exception(page, server)
    chart = page.locator('[class*="st-key-sbs_chart"] .js-plotly-plot').first
    chart.wait_for()
    title = chart.locator(".gtitle").bounding_box()
    legend = chart.locator(".legend").bounding_box()
    assert legend["y"] >= title["y"] + title["height"] - 1, (title, legend)
    # one or two rows of entries, never a column that squeezes the plot
    rows = chart.locator(".legend .traces").evaluate_all(
        "els => [...new Set(els.map(e => Math.round(e.getBoundingClientRect().top)))]")
    assert len(rows) in (1, 2), rows
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    chart.screenshot(path=str(SCREENSHOTS / f"legend_top_p_{lang}_present{present}.png"))


@pytest.mark.parametrize("present", ["0", "1"])
def test_figure_text_and_captions_reach_4_5_to_1(pool, present):
    page = step_by_step(pool, "en", present)
    chart = page.locator('[class*="st-key-sbs_chart"] .js-plotly-plot').first
    chart.wait_for()
    back = page_background(page)
    for selector in (".xtick text", ".ytick text", ".g-xtitle text", ".g-ytitle text", ".legendtext"):
        fill = chart.locator(selector).first.evaluate("el => getComputedStyle(el).fill")
        assert contrast(rgb(fill), back) >= 4.5, (selector, fill)
    # the notes on the chart: the top-p line's label and the chosen token's
    notes = text_colours(chart, ".annotation-text")
    assert any("top-p = 0.9" in text for text, _, _ in notes) and len(notes) >= 2, notes
    for text, fill, alpha in notes:
        assert contrast(rgb(fill), back, alpha=alpha) >= 4.5, (text, fill, alpha)
    caption = page.locator('[data-testid="stMain"] [data-testid="stCaptionContainer"]').first
    colour, opacity = caption.evaluate("el => [getComputedStyle(el).color, getComputedStyle(el).opacity]")
    c = rgb(colour)
    assert contrast(c, back, alpha=c[3] * float(opacity)) >= 4.5, (colour, opacity)


def test_charts_add_no_toolbar_stops_to_the_tab_order(pool):
    page = step_by_step(pool)
    chart = page.locator('[class*="st-key-sbs_chart"] .js-plotly-plot').first
    chart.wait_for()
    chart.hover()                         # the toolbar is drawn on hover too
    page.wait_for_timeout(500)
    found = page.evaluate("""() => { const all = [...document.querySelectorAll(
            '.stPlotlyChart .modebar a, .stPlotlyChart .modebar button, .stPlotlyChart .modebar [tabindex]')];
        return [all.length, all.filter(el => el.tabIndex >= 0).length]; }""")
    assert found[0] > 0 and found[1] == 0, found      # the toolbar is there, for the mouse only


def test_a_focused_sidebar_link_does_not_look_like_the_current_page(pool):
    page = step_by_step(pool)
    links = page.locator('[data-testid="stSidebarNav"] a')
    current, other = links.nth(0), links.nth(1)
    other.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")            # focus arrives by keyboard, so :focus-visible applies
    look = "el => { const s = getComputedStyle(el); return [s.outlineStyle, s.outlineWidth, s.textDecorationLine]; }"
    assert other.evaluate(look) != current.evaluate(look)
    assert other.evaluate(look)[0] != "none"


@pytest.mark.parametrize("width", [1280, 1400])
def test_beam_table_shows_every_column_and_the_endings(page, server, width):
    page.set_viewport_size({"width": width, "height": 900})
    open_page(page, server, "beam_tree", "lang=en&tour=0&num_beams=4&max_new_tokens=12")
    assert_no_exception(page, server)
    table = page.locator('.st-key-beam_table [data-testid="stTable"]').first
    table.wait_for()
    table.scroll_into_view_if_needed()
    overflow = table.evaluate("el => [el.scrollWidth, el.clientWidth, el.querySelector('table').scrollWidth]")
    assert max(overflow[0], overflow[2]) <= overflow[1] + 1, overflow          # no column cut off at the right
    # every hypothesis' text is shown whole (wrapped, never cut with an ellipsis)
    cells = table.locator("tbody tr td:nth-child(2)").all_inner_texts()
    assert cells and all(not c.endswith("...") for c in cells)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    table.screenshot(path=str(SCREENSHOTS / f"beam_table_{width}.png"))


def test_long_hypotheses_are_shown_whole_and_wrap(page, server):
    """40 tokens a hypothesis, written with ␣ and ⏎ for whitespace: each text cell wraps onto several lines
    and nothing in it runs past its edge or is folded away."""
    page.set_viewport_size({"width": 1280, "height": 900})
    open_page(page, server, "beam_tree", "lang=en&tour=0&num_beams=4&max_new_tokens=40")
    assert_no_exception(page, server)
    table = page.locator('.st-key-beam_table [data-testid="stTable"]').first
    table.wait_for()
    table.scroll_into_view_if_needed()
    overflow = table.evaluate("el => [el.scrollWidth, el.clientWidth, el.querySelector('table').scrollWidth]")
    assert max(overflow[0], overflow[2]) <= overflow[1] + 1, overflow
    cells = table.locator("tbody tr td:nth-child(2)")
    shape = cells.evaluate_all("""els => els.map(e => {
        const runs = [e, ...e.querySelectorAll('*')].some(c => c.scrollWidth > c.clientWidth + 1);
        const line = parseFloat(getComputedStyle(e).lineHeight) || 20;
        return {text: e.innerText, runs_past: runs, lines: Math.round(e.getBoundingClientRect().height / line)};
    })""")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    table.screenshot(path=str(SCREENSHOTS / "beam_table_long_1280.png"))
    assert shape and not [c for c in shape if c["runs_past"]], shape
    assert all(c["lines"] >= 2 for c in shape), shape          # 40 tokens do not fit one line of this column
    assert not [c for c in shape if c["text"].startswith("…")], shape
