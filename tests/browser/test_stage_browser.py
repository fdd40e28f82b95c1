"""Presentation mode in Chromium: on every page with figures, at 1280x720 (a common projector) and at
1400x900, in English and in 中文, the page's main figure is whole on the first screen, with no scrolling:
its plot area, its title, its axis titles and tick labels all lie inside the window, and inside the figure.

The page opens fresh at the first size (a new tab, sized before the page is drawn), as on a projector; then
the window grows to the second size, as a teacher's window made larger (the stage follows the window). Screenshots
of each first screen land in artifacts/screenshots/stage_<page>_<width>x<height>[_zh].png.

Every page renders without presentation mode too, with no exception and its main chart (a screenshot of each in
artifacts/screenshots/page_<page>.png). On the same pages, with and without `present=1`: everything that holds
text grows with it (token chips, the colour legend, dropdown text, tables, lane chips and axis titles: the
browser's computed font size), and the notes drawn on charts and the beam tree's node labels reach a contrast of
4.5:1. These tests only look, so they share the page loads (a module's page pool): the English pages the
first-screen test opened in presentation mode, and each page without it, opened once (by the test that every
page renders).
"""
from __future__ import annotations

import json

import pytest

from browser_helpers import (MODEL_TIMEOUT_MS, ROOT, SCREENSHOTS, PagePool, assert_no_exception, existing_pages,
                             open_page, screenshot, wait_idle)
from contrast import contrast, page_background, rgb, text_colours

# page -> Streamlit key (prefix) of its main figure
MAIN_FIGURE = {"step_by_step": "sbs_chart", "beam_tree": "beam_chart", "compare": "cmp_chart",
               "expected_embedding": "ee_lane_chart", "teacher_forcing": "tf_forced_chart", "kv_cache": "kv_rows_chart"}
SCREENS = ((1280, 720), (1400, 900))
SLACK = 3          # px: sub-pixel rounding of the boxes, against the window
CUT = 1            # px: against the figure's own edge, past which a glyph is visibly cut off
# the whole figure, then the parts a reader needs whole: titles, axis titles, tick labels, the colour bar
PARTS = (".main-svg", ".gtitle", ".g-xtitle", ".g-ytitle", ".g-y2title", ".xaxislayer-above", ".yaxislayer-above",
         ".colorbar")


def figure_boxes(page, key: str) -> dict:
    """The box in the window of each part of the figure that is drawn (not empty), the window's size,
    and how far the page has scrolled."""
    return page.evaluate("""([key, parts]) => {
        const plot = document.querySelector(`[class*="st-key-${key}"] .js-plotly-plot`);
        const boxes = {};
        for (const part of parts) {
            plot.querySelectorAll(part).forEach((el, i) => {
                const r = el.getBoundingClientRect();
                if (r.width > 0 && r.height > 0)
                    boxes[`${part}#${i}`] = {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
            });
        }
        return {boxes, width: window.innerWidth, height: window.innerHeight,
                scrolled: (document.querySelector('[data-testid="stMain"]') || {}).scrollTop || 0};
    }""", [key, list(PARTS)])


def first_screen_problems(page, key: str) -> dict:
    """The parts of the main figure outside the window or cut off by the figure's own edge (empty when whole)."""
    found = figure_boxes(page, key)
    assert found["scrolled"] == 0
    assert any(part.startswith(".main-svg") for part in found["boxes"])
    assert any(part.startswith(".g-xtitle") or part.startswith(".xaxislayer") for part in found["boxes"])
    outside = {part: box for part, box in found["boxes"].items()
               if box["top"] < -SLACK or box["left"] < -SLACK or box["bottom"] > found["height"] + SLACK
               or box["right"] > found["width"] + SLACK}
    # and inside the figure itself, which cuts off whatever runs past its edges (a long axis title)
    figure = found["boxes"][".main-svg#0"]
    cut = {part: box for part, box in found["boxes"].items()
           if box["top"] < figure["top"] - CUT or box["left"] < figure["left"] - CUT
           or box["bottom"] > figure["bottom"] + CUT or box["right"] > figure["right"] + CUT}
    return {"outside the window": outside, "cut off": cut, "figure": figure} if outside or cut else {}


def stage_drawn_at(page, key: str, width: int, height: int, tries: int = 60) -> None:
    """Wait until the main figure is drawn for this window: the window at its size, and the figure's box the
    same on two readings 300 ms apart (the stage is fitted to the window, then Plotly redraws at its height)."""
    page.wait_for_function("([w, h]) => window.innerWidth === w && window.innerHeight === h", arg=[width, height])
    svg = page.locator(f'[class*="st-key-{key}"] .js-plotly-plot .main-svg').first
    box = None
    for _ in range(tries):
        page.wait_for_timeout(300)
        now = svg.bounding_box()
        if now is not None and now == box:
            return
        box = now


# Step by step opens sampling in llama.cpp's order with nine stages on (penalties, DRY, top-nσ, top-k, typical,
# top-p, min-p, XTC, dynamic temperature), on a prompt that repeats itself, so that its stage view is looked at too
NINE_STAGES = ("strategy=sample&sampler_order=llama.cpp&temperature=0.8&dynatemp_range=0.5&top_k=40&top_p=0.95"
               "&min_p=0.05&typical_p=0.95&presence_penalty=0.5&dry_multiplier=0.8&top_n_sigma=2&xtc_probability=0.5"
               "&prompt=One%2C+two%2C+three%2C+four.+One%2C+two%2C")


def looked_at(present: str) -> str:
    """The address of a page in English, in presentation mode or not, that the module's looking tests share (in
    presentation mode: the first-screen test's own, but on Step by step, which it opens with nine stages on)."""
    return f"present={present}&tour=0&lang=en&max_new_tokens=6"


@pytest.fixture(scope="module")
def pool(shared_context, server):
    pages = PagePool(shared_context, server)
    yield pages
    pages.close()


def stage_query(name: str, lang: str) -> str:
    extra = f"&{NINE_STAGES}" if name == "step_by_step" else ""
    return f"present=1&tour=0&lang={lang}&max_new_tokens=6{extra}"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", list(MAIN_FIGURE))
def test_main_figure_is_on_the_first_screen(pool, server, name, lang):
    key = MAIN_FIGURE[name]
    page = pool.get(name, stage_query(name, lang), SCREENS[0])      # sized before the page is drawn
    try:
        assert_no_exception(page, server)
        page.locator(f'[class*="st-key-{key}"] .js-plotly-plot .main-svg').first.wait_for()
        for n, (width, height) in enumerate(SCREENS):
            page.set_viewport_size({"width": width, "height": height})
            stage_drawn_at(page, key, width, height)
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            suffix = "" if lang == "en" else f"_{lang}"
            page.screenshot(path=str(SCREENSHOTS / f"stage_{name}_{width}x{height}{suffix}.png"))  # first screen
            problems = first_screen_problems(page, key)
            assert not problems, (name, lang, width, height, problems)
            if name == "step_by_step" and n == 0:
                nine_stages_readable(page, lang)
        assert_no_exception(page, server)
    finally:
        if (name, lang) not in SHARED:        # no other test looks at it: closed now
            pool.take(name, stage_query(name, lang), SCREENS[0]).close()


def nine_stages_readable(page, lang: str) -> None:
    """The stage view at 1280x720 with nine stages on: every stage has its tick, no tick's text runs into
    another's, each lies inside the figure, and every stage's row has its state where the stage has one.
    Then back to the top, for the next size's first screen."""
    words = json.loads((ROOT / "assets" / "texts" / lang / "pipeline.json").read_text(encoding="utf-8"))
    page.get_by_text(words["stages_title"]).first.click()
    figure = page.locator('[class*="st-key-sbs_stages_fig"] .js-plotly-plot').first
    figure.locator(".xtick").nth(9).wait_for()
    wait_idle(page)
    figure.scroll_into_view_if_needed()
    page.wait_for_timeout(500)           # Plotly draws the ticks at the expander's width
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"stage_view_nine_stages_1280x720_{lang}.png"))
    found = figure.evaluate("""(plot) => {
        const svg = plot.querySelector('.main-svg').getBoundingClientRect();
        const ticks = [...plot.querySelectorAll('.xtick text')].map(e => e.getBoundingClientRect())
            .map(r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom}));
        return {svg: {left: svg.left, right: svg.right, top: svg.top, bottom: svg.bottom}, ticks};
    }""")
    ticks, svg = sorted(found["ticks"], key=lambda r: r["left"]), found["svg"]
    assert len(ticks) == 10                                   # raw and nine stages
    for a, b in zip(ticks, ticks[1:]):
        assert a["right"] <= b["left"] + CUT, (lang, a, b)     # side by side, never over each other
    for box in ticks:
        assert svg["left"] - CUT <= box["left"] and box["right"] <= svg["right"] + CUT, (lang, box)
        assert box["bottom"] <= svg["bottom"] + CUT, (lang, box)
    table = page.locator('[data-testid="stExpander"]').filter(has_text=words["stages_title"]).first
    assert table.get_by_text(words["col_state"]).count() >= 1
    page.get_by_text(words["stages_title"]).first.click()      # closed again: the page as it opened
    wait_idle(page)
    back_to_the_top(page)


def back_to_the_top(page) -> None:
    """Scroll the page back to its top and take the focus off any field: the page as it opened, for the next look."""
    page.evaluate("""() => { if (document.activeElement) document.activeElement.blur();
                             const m = document.querySelector('[data-testid="stMain"]'); if (m) m.scrollTop = 0; }""")
    page.wait_for_function("() => ((document.querySelector('[data-testid=\"stMain\"]') || {}).scrollTop || 0) === 0")


# page -> (its chart's key, the text drawn on it, how many at least): the contrast test's, below
DRAWN_TEXT = {"beam_tree": ("beam_chart", ".textpoint text", 5),
              "teacher_forcing": ("tf_forced_chart", ".annotation-text", 1),
              "expected_embedding": ("ee_lane_chart", ".annotation-text", 1)}
# the pages a test after the font sizes' looks at again (the others are closed once measured, to keep the browser
# to a few tabs): the notes' contrast, and the step slider's test, which takes Step by step and clicks Next
LOOKED_AT_LATER = {*DRAWN_TEXT, "step_by_step"}


# ---- presentation mode: everything that holds text grows with it ------------------------------------------
GROWTH = 1.15          # at least this much larger in presentation mode

# what is measured, by page: a name -> a CSS selector for the element whose own text is measured
MEASURED = {
    "step_by_step": {
        "token chips": '[data-testid="stHtml"] div[style*="monospace"] span[title]',
        "colour legend": '[data-testid="stHtml"] span[style*="padding:1px 6px"]',
        "dropdown text": '.st-key-sbs_branch_token input',               # the choice shown in the box
        "axis title": '[class*="st-key-sbs_chart"] .g-xtitle text',
    },
    "beam_tree": {
        "table": '.st-key-beam_table [data-testid="stTable"] td',
        "axis title": '[class*="st-key-beam_chart"] .g-xtitle text',
    },
    "compare": {
        "lane chips": '[class*="st-key-cmp_lane_"] [data-testid="stHtml"] span[title]',
        "axis title": '[class*="st-key-cmp_chart"] .g-xtitle text',
    },
}


# page -> (name, a dropdown's box, its options)
OPENED = {"step_by_step": ("dropdown options", '.st-key-sbs_branch_token input',
                           '[data-testid="stSelectboxVirtualDropdown"] [role="option"]')}


def open_list(page, box: str, options: str, tries: int = 5) -> None:
    """Open a dropdown from the keyboard. A key pressed while the page is still settling after its first
    load (a box drawn again) can be lost, so the key is pressed again until the list shows."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        wait_idle(page)
        page.locator(box).first.focus()
        page.keyboard.press("ArrowDown")
        try:
            page.locator(options).first.wait_for(timeout=5_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"the dropdown {box} did not open after {tries} presses of the down arrow")


def font_sizes(page, selectors: dict) -> dict:
    """name -> the computed font size (px) of the first element under the selector that holds text itself."""
    return page.evaluate("""(selectors) => {
        const holdsText = (e) => e.tagName === 'INPUT' || [...e.childNodes].some(
            n => n.nodeType === 3 && n.textContent.trim());
        const out = {};
        for (const [name, selector] of Object.entries(selectors)) {
            const roots = [...document.querySelectorAll(selector)];
            const el = roots.map(r => holdsText(r) ? r : [...r.querySelectorAll('*')].find(holdsText)).find(Boolean);
            out[name] = el ? parseFloat(getComputedStyle(el).fontSize) : null;
        }
        return out;
    }""", selectors)


# ---- every page renders, outside presentation mode: the pages the looking tests below share -----------------
# what each page must show once its first run is done (its main chart; the interview page has none)
PAGE_SIGN = {"step_by_step": "[data-testid='stPlotlyChart'] .main-svg", "beam_tree": ".st-key-beam_chart .main-svg",
             "compare": ".st-key-cmp_chart .main-svg", "expected_embedding": ".st-key-ee_lane_chart .main-svg",
             "teacher_forcing": ".st-key-tf_forced_chart .main-svg", "kv_cache": ".st-key-kv_rows_chart .main-svg",
             "structured": ".st-key-so_strip .main-svg", "speculative": ".st-key-sd_strip .main-svg",
             "answers": ".st-key-wa_tree .main-svg", "reproduce": ".st-key-rp_chart .main-svg", "interview": "h1"}


@pytest.mark.parametrize("name", existing_pages())
def test_each_page_renders_without_an_exception(pool, server, name):
    page = pool.get(name, looked_at("0"), SCREENS[0])
    assert_no_exception(page, server)
    page.locator(PAGE_SIGN.get(name, "h1")).first.wait_for(state="attached", timeout=MODEL_TIMEOUT_MS)
    wait_idle(page)
    assert page.locator("h1").count() >= 1
    screenshot(page, f"page_{name}")
    assert_no_exception(page, server)
    if name not in (*MEASURED, *DRAWN_TEXT):          # no test below looks at it
        pool.take(name, looked_at("0"), SCREENS[0]).close()


@pytest.mark.parametrize("name", list(MEASURED))
def test_text_in_chips_legends_dropdowns_tables_and_axes_grows(pool, server, name):
    sizes = {}
    for present in ("0", "1"):
        page = pool.get(name, looked_at(present), SCREENS[0])
        assert_no_exception(page, server)
        for selector in MEASURED[name].values():     # every part measured is drawn (the chart, the table...)
            page.locator(selector).first.wait_for(state="attached")
        sizes[present] = font_sizes(page, MEASURED[name])
        if name in OPENED:              # a dropdown's list of options, drawn outside the page once it opens
            what, box, options = OPENED[name]
            open_list(page, box, options)
            sizes[present].update(font_sizes(page, {what: options}))
            page.keyboard.press("Escape")
            back_to_the_top(page)       # the focused box had scrolled the page to it
        if name not in LOOKED_AT_LATER:
            pool.take(name, looked_at(present), SCREENS[0]).close()
    for what in sizes["0"]:
        plain, presented = sizes["0"][what], sizes["1"][what]
        assert plain and presented, (name, what, sizes)
        assert presented >= GROWTH * plain, (name, what, plain, presented)


# ---- the notes on charts and the beam tree's node labels reach 4.5:1 ------------------------------------------
@pytest.mark.parametrize("present", ["0", "1"])
@pytest.mark.parametrize("name", list(DRAWN_TEXT))
def test_notes_and_node_labels_reach_4_5_to_1(pool, server, name, present):
    """The beam tree's node labels, "first divergence" and "lanes part" read like the rest of the page."""
    key, selector, least = DRAWN_TEXT[name]
    page = pool.get(name, looked_at(present), SCREENS[0])
    assert_no_exception(page, server)
    chart = page.locator(f'[class*="st-key-{key}"] .js-plotly-plot').first
    chart.wait_for()
    back = page_background(page)
    drawn = text_colours(chart, selector)
    assert len(drawn) >= least, drawn
    for text, fill, alpha in drawn:
        assert contrast(rgb(fill), back, alpha=alpha) >= 4.5, (name, text, fill, alpha)
    pool.take(name, looked_at(present), SCREENS[0]).close()           # the last test that looks at it


# the first-screen test's pages that the tests above look at after it (the others are closed at its end)
SHARED = {(name, "en") for name in (*MEASURED, *DRAWN_TEXT) if stage_query(name, "en") == looked_at("1")}


LARGE = (1920, 1080)
REACH = 48         # px: the figure ends at most this far above the window's bottom edge (a small gap is kept)


def label_overlaps(page, key: str) -> list:
    """Pairs of the figure's node labels whose drawn boxes overlap (text over text), with their texts."""
    return page.evaluate("""(key) => {
        const plot = document.querySelector(`[class*="st-key-${key}"] .js-plotly-plot`);
        const boxes = [...plot.querySelectorAll('.textpoint text')].map(e => [e.textContent, e.getBoundingClientRect()])
            .filter(([, r]) => r.width > 0 && r.height > 0);
        const out = [];
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const [a, r] = boxes[i], [b, s] = boxes[j];
            const x = Math.min(r.right, s.right) - Math.max(r.left, s.left);
            const y = Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top);
            if (x > 1 && y > 1) out.push([a, b, Math.round(x), Math.round(y)]);
        }
        return out;
    }""", key)


@pytest.mark.parametrize("name", ["step_by_step", "beam_tree"])
def test_main_figure_fills_a_large_window(page, server, name):
    """At 1920x1080 the main figure uses the window's height (not a fixed 450 px), still whole on the first
    screen; on a 12-step beam tree the node labels then have room and none is drawn over another."""
    key = MAIN_FIGURE[name]
    width, height = LARGE
    page.set_viewport_size({"width": width, "height": height})      # before the page is drawn
    open_page(page, server, name, "present=1&tour=0&lang=en&max_new_tokens=12")
    assert_no_exception(page, server)
    page.locator(f'[class*="st-key-{key}"] .js-plotly-plot .main-svg').first.wait_for()
    page.wait_for_timeout(800)      # the box is fitted to the window, then Plotly draws at that height
    found = figure_boxes(page, key)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"stage_{name}_{width}x{height}.png"))
    figure = found["boxes"][".main-svg#0"]
    assert found["scrolled"] == 0
    assert height - REACH <= figure["bottom"] <= height + SLACK, (name, figure)
    assert figure["bottom"] - figure["top"] > 0.5 * height, (name, figure)
    if name == "beam_tree":
        assert not label_overlaps(page, key)



@pytest.mark.parametrize("present", ["0", "1"])
def test_the_chart_stays_in_place_when_the_step_slider_comes(pool, server, present):
    """On the first step a note stands where the step slider will be, as tall as the slider: the first Next
    brings the slider, and the chart (drawn on the click, from the figure sent ahead) does not move down."""
    page = pool.take("step_by_step", looked_at(present), SCREENS[0])     # 1280x720: what the tests above saw
    try:
        page.set_viewport_size({"width": 1280, "height": 720})
        chart = page.locator('[class*="st-key-sbs_chart"] .js-plotly-plot .main-svg').first
        chart.wait_for()
        wait_idle(page)
        assert page.locator(".st-key-sbs_slider").count() == 0
        top = chart.bounding_box()["y"]
        page.locator(".st-key-sbs_next button").first.click()
        page.locator(".st-key-sbs_slider").first.wait_for()
        wait_idle(page)
        assert chart.bounding_box()["y"] == pytest.approx(top, abs=1), present
        assert_no_exception(page, server)
    finally:
        page.close()
