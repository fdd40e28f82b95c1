"""Presentation mode in Chromium: on every page with figures, at 1280x720 (a common projector) and at
1400x900, the page's main figure is on the first screen, with no scrolling.

Screenshots of that first screen land in artifacts/screenshots/stage_<page>_<width>x<height>.png.
"""
from __future__ import annotations

import pytest

from browser_helpers import SCREENSHOTS, assert_no_exception, open_page

# page -> Streamlit key (prefix) of its main figure
MAIN_FIGURE = {"step_by_step": "sbs_chart", "beam_tree": "beam_chart", "compare": "cmp_chart",
               "expected_embedding": "ee_lane_chart", "teacher_forcing": "tf_forced_chart", "kv_cache": "kv_rows_chart"}
SCREENS = ((1280, 720), (1400, 900))
SHOWN = 0.6        # at least this share of the figure (or of the screen below its top) is visible


def figure_box(page, key: str) -> dict:
    """The figure's box in the viewport, and the viewport's height."""
    return page.evaluate("""(key) => {
        const el = document.querySelector(`[class*="st-key-${key}"] .js-plotly-plot`)
                   || document.querySelector(`[class*="st-key-${key}"]`);
        const r = el.getBoundingClientRect();
        return {top: r.top, bottom: r.bottom, height: r.height, screen: window.innerHeight,
                scrolled: (document.querySelector('[data-testid="stMain"]') || {}).scrollTop || 0};
    }""", key)


@pytest.mark.parametrize("name", list(MAIN_FIGURE))
def test_main_figure_is_on_the_first_screen(page, server, name):
    key = MAIN_FIGURE[name]
    page.set_viewport_size({"width": SCREENS[0][0], "height": SCREENS[0][1]})
    open_page(page, server, name, "present=1&tour=0&lang=en&max_new_tokens=6")
    assert_no_exception(page, server)
    page.locator(f'[class*="st-key-{key}"] .js-plotly-plot').first.wait_for()
    for width, height in SCREENS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(500)          # Plotly redraws at the new width (a repaint, not a wait for the app)
        box = figure_box(page, key)
        assert box["scrolled"] == 0
        visible = min(box["bottom"], box["screen"]) - box["top"]
        assert box["top"] < box["screen"] * 0.5, (name, width, height, box)
        assert visible >= SHOWN * min(box["height"], box["screen"] - box["top"]), (name, width, height, box)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"stage_{name}_{width}x{height}.png"))      # the first screen only
