"""In Chromium: numbers that agree between pages, a reference tied to its prompt, coinciding lanes named,
and a strategy change during a running rerun that leaves the text whole."""
from __future__ import annotations

import json
from pathlib import Path

from browser_helpers import SCREENSHOTS, act, assert_no_exception, open_page, set_prompt, wait_idle

ROOT = Path(__file__).resolve().parents[2]


def texts(section: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / "en" / f"{section}.json").read_text(encoding="utf-8"))


def test_kv_cache_counts_the_last_of_n_steps_as_step_n(page, server):
    open_page(page, server, "kv_cache", "lang=en&tour=0&max_new_tokens=6")
    assert_no_exception(page, server)
    title = page.locator('[class*="st-key-kv_rows_chart"] .gtitle').first
    title.wait_for()
    # six tokens: the page opens on the last step, which is step 6 (the slider runs 1..6)
    assert title.text_content().strip().endswith("after step 6")
    assert "6" in page.locator(".st-key-kv_step").first.inner_text()


def test_teacher_forcing_asks_for_a_reference_when_the_prompt_changes(page, server):
    teacher = texts("teacher")
    open_page(page, server, "teacher_forcing", "lang=en&tour=0&max_new_tokens=6")
    page.locator('[class*="st-key-tf_forced_chart"] .js-plotly-plot').first.wait_for()
    set_prompt(page, "The best way to learn programming is")
    assert_no_exception(page, server)
    page.get_by_text(teacher["reference_other_prompt"].split("“")[0].strip()).first.wait_for()
    assert page.locator('[class*="st-key-tf_forced_chart"]').count() == 0      # nothing scored under it
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "teacher_reference_other_prompt.png"))
    act(page, lambda: page.locator(".st-key-tf_use_sampled button").first.click())
    assert_no_exception(page, server)
    page.locator('[class*="st-key-tf_forced_chart"] .js-plotly-plot').first.wait_for()
    page.locator('[class*="st-key-tf_kl_chart"] .js-plotly-plot').first.wait_for()   # the free run parts from it


def test_compare_names_lanes_that_coincide(page, server):
    open_page(page, server, "compare", "lang=en&tour=0&max_new_tokens=5&lanes=greedy,top_k&cmp_top_k=1")
    assert_no_exception(page, server)
    note = page.get_by_text(texts("compare")["coincide"].split("{n}")[0].strip())
    note.first.wait_for()
    lines = page.locator('[class*="st-key-cmp_chart"] .scatterlayer .trace .js-line')
    lines.first.wait_for()           # the note is written before the chart, which Plotly draws after it
    widths = {line.evaluate("el => getComputedStyle(el).strokeWidth") for line in lines.all()}
    assert len(widths) >= 2          # the coinciding lanes are drawn in different widths


def test_switching_to_sample_and_nudging_temperature_mid_run_keeps_the_text(page, server):
    open_page(page, server, "step_by_step", "lang=en&tour=0&strategy=greedy&max_new_tokens=12")
    for _ in range(5):
        act(page, lambda: page.locator(".st-key-sbs_next button").first.click())
    step = texts("step")
    page.locator(".st-key-strategy").first.get_by_text(step["strategy_sample"]).click()     # starts a replay...
    page.wait_for_timeout(150)
    handle = page.locator('.st-key-temperature [tabindex="0"]').first
    handle.wait_for()
    handle.focus()
    page.keyboard.press("ArrowRight")                                                # ...and nudge it meanwhile
    wait_idle(page)
    assert_no_exception(page, server)
    tokens = page.locator('[data-testid="stMain"] [data-testid="stHtml"] span[title^="step "]')
    assert tokens.count() == 6                     # steps 1..6 of the text so far, none lost
    assert page.locator(".st-key-sbs_back button").first.is_enabled()
    assert "6" in page.locator(".st-key-sbs_slider").first.inner_text()
