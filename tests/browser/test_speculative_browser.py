"""In Chromium, on the bundled model: the Speculative decoding page opened from a link in presentation mode at
1280x720 has its whole strip on the first screen; and the proof, drawn on the page, tells the slip (a rejection
drawn from p itself) from the rule."""
from __future__ import annotations

import json
from pathlib import Path

from browser_helpers import assert_no_exception, click_key, open_page, screenshot

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The+capital+of+France+is+Paris.+The+capital+of+Italy+is"
EN = json.loads((ROOT / "assets" / "texts" / "en" / "spec.json").read_text(encoding="utf-8"))


def test_the_strip_fits_the_first_screen_in_presentation_mode(page, server):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_page(page, server, "speculative", f"present=1&tour=0&lang=en&prompt={PROMPT}&max_new_tokens=10"
                                           "&sd_kind=early-exit&sd_layer=24&sd_k=4&sd_verify=sample&seed=3")
    assert_no_exception(page, server)
    chart = page.locator('[class*="st-key-stage_fit_sd_strip"] .js-plotly-plot').first
    chart.wait_for()
    box = chart.bounding_box()
    shot = screenshot(page, "speculative_present_1280x720")
    assert box["y"] >= 0 and box["y"] + box["height"] <= 720, (box, shot)
    assert box["height"] >= 300, (box, shot)          # the window's height, not a thumbnail
    # every box's token is written inside it: the labels sit within the plot area
    area = page.locator('[class*="st-key-stage_fit_sd_strip"] .nsewdrag').first.bounding_box()
    labels = page.locator('[class*="st-key-stage_fit_sd_strip"] .textpoint text').all()
    assert labels, shot
    for label in labels:
        b = label.bounding_box()
        assert area["x"] - 2 <= b["x"] and b["x"] + b["width"] <= area["x"] + area["width"] + 2, (b, area, shot)


def test_the_proof_on_the_page_tells_the_slip_from_the_rule(page, server):
    open_page(page, server, "speculative", f"tour=0&lang=en&prompt={PROMPT}&max_new_tokens=6"
                                           "&sd_kind=early-exit&sd_layer=26&sd_k=3&sd_verify=sample&sd_n=20000")
    assert_no_exception(page, server)
    click_key(page, "sd_prove")
    assert_no_exception(page, server)
    page.locator('[class*="st-key-sd_proof_chart"] .js-plotly-plot').first.wait_for()
    titles = page.locator('[class*="st-key-sd_proof_chart"] .annotation-text').all_inner_texts()
    shot = screenshot(page, "speculative_proof")
    assert len(titles) == 4, (titles, shot)
    verdicts = page.locator('[data-testid="stMarkdownContainer"] li').all_inner_texts()
    leaves = EN["verdict_leaves"].split("**")[1]
    rules = {EN[f"rule_{r}"]: r for r in ("plain", "exact", "residual_is_p", "ids_only")}
    found = {rules[v.split(":")[0]]: leaves in v for v in verdicts if v.split(":")[0] in rules}
    assert found == {"plain": False, "exact": False, "residual_is_p": True, "ids_only": False}, (verdicts, shot)
