"""The Structured output page in Chromium on the bundled model: in presentation mode at 1280x720 the Z_t strip is
whole on the first screen (title, bars, axis title), and the candidates the grammar removed are marked so in a
column of their own, in Chinese too, never struck through (a line through 一 reads as 二)."""
from __future__ import annotations

import json
from pathlib import Path

from browser_helpers import assert_no_exception, open_page, screenshot

ROOT = Path(__file__).resolve().parents[2]

LINK = "tour=0&so_kind=choices&so_example=cities&so_strategy=greedy&max_new_tokens=8"


def texts(section: str, lang: str = "en") -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


def test_the_z_strip_fits_the_first_screen_of_a_projector(page, server):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_page(page, server, "structured", LINK + "&present=1")
    assert_no_exception(page, server)
    chart = page.locator('[class*="st-key-so_strip"] .js-plotly-plot').first
    chart.wait_for()
    shot = screenshot(page, "structured_present_1280x720")
    for part in (".gtitle", ".nsewdrag", ".g-xtitle text", ".g-ytitle text"):
        box = chart.locator(part).first.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 720, (part, box, shot)
    assert chart.locator(".point").count() >= 2          # one bar per step of "Paris" / "London" / "Berlin"


def test_removed_candidates_are_marked_not_struck_through(page, server):
    open_page(page, server, "structured", LINK + "&lang=zh")
    assert_no_exception(page, server)
    table = page.locator('[data-testid="stMarkdown"] table').first
    table.wait_for()
    assert table.locator("del, s").count() == 0
    marked = table.locator("td", has_text=texts("structured", "zh")["removed"])
    assert marked.count() >= 5                               # the first step allows three words of the vocabulary
    assert marked.first.evaluate("e => getComputedStyle(e).textDecorationLine") == "none"
    screenshot(page, "structured_zh_removed")
