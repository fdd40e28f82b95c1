"""Presentation mode in Chromium: everything that holds text grows with it. Token chips, the colour legend,
dropdown text, tables, lane chips and axis titles are measured (the browser's computed font size) on the
same page with and without `present=1`."""
from __future__ import annotations

import pytest

from browser_helpers import assert_no_exception, open_page, wait_idle

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


@pytest.mark.parametrize("name", list(MEASURED))
def test_text_in_chips_legends_dropdowns_tables_and_axes_grows(page, server, name):
    page.set_viewport_size({"width": 1400, "height": 900})
    sizes = {}
    for present in ("0", "1"):
        open_page(page, server, name, f"lang=en&tour=0&max_new_tokens=6&present={present}")
        assert_no_exception(page, server)
        for selector in MEASURED[name].values():     # every part measured is drawn (the chart, the table...)
            page.locator(selector).first.wait_for(state="attached")
        sizes[present] = font_sizes(page, MEASURED[name])
        if name in OPENED:              # a dropdown's list of options, drawn outside the page once it opens
            what, box, options = OPENED[name]
            open_list(page, box, options)
            sizes[present].update(font_sizes(page, {what: options}))
            page.keyboard.press("Escape")
    for what in sizes["0"]:
        plain, presented = sizes["0"][what], sizes["1"][what]
        assert plain and presented, (name, what, sizes)
        assert presented >= GROWTH * plain, (name, what, plain, presented)
