"""Whole answers in Chromium: Stop in the middle of a search shows the tree so far (its ledger still adds up to
1), and a saved run opens from a file without the model, while a file that lies about its masses is one line."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from browser_helpers import MODEL_TIMEOUT_MS, assert_no_exception, screenshot, wait_idle

ROOT = Path(__file__).resolve().parents[2]
EN = json.loads((ROOT / "assets" / "texts" / "en" / "answers.json").read_text(encoding="utf-8"))
EN_END = json.loads((ROOT / "assets" / "texts" / "en" / "answers_end.json").read_text(encoding="utf-8"))
BIG = "prompt=Tell+me+a+story+about+a+robot.&chat=true&wa_budget=1000&wa_depth=16&wa_branch=16&wa_samples=0&tour=0"


@pytest.mark.parametrize("which", ["the page's", "Streamlit's"])
def test_stop_shows_the_tree_so_far(page, server, which):
    """Either Stop: the page's own button, or the one in Streamlit's toolbar that users press first."""
    page.goto(f"{server.url}/answers?{BIG}&seed={len(which)}", wait_until="domcontentloaded")
    page.get_by_text("So far:").first.wait_for(timeout=MODEL_TIMEOUT_MS)
    if which == "Streamlit's":
        page.locator('[data-testid="stStatusWidget"] button').first.click()
    else:
        page.locator(".st-key-_stop_button_answers button").first.click()
    note = page.get_by_text("Stopped after").first
    note.wait_for(timeout=MODEL_TIMEOUT_MS)
    expanded = int(re.search(r"Stopped after ([\d,]+) of 1,000", note.inner_text()).group(1).replace(",", ""))
    assert 0 < expanded < 1000
    wait_idle(page)
    page.locator(".st-key-wa_tree .main-svg").first.wait_for(state="attached")
    main = page.inner_text('[data-testid="stMain"]')
    assert f"{expanded:,} prefixes expanded" in main and "1.000000" in main
    # the strategies' heading says why it places none; no Stop button is left
    assert EN_END["landed_none_stopped"] in main
    assert page.locator(".st-key-_stop_button_answers").count() == 0
    screenshot(page, "answers_stopped")
    assert_no_exception(page, server)


def test_a_saved_run_opens_without_the_model_and_a_lying_one_is_one_line(page, server, tmp_path):
    from engine.answers import TreeSettings
    from engine.answers.record import to_json
    from engine.answers.run import explore
    from tiny_models import tiny_llama

    run = explore(tiny_llama(), "The capital of", TreeSettings(depth=3, budget=24, branch=3), samples=8)
    good, bad = tmp_path / "run.json", tmp_path / "lying.json"
    good.write_text(to_json(run), encoding="utf-8")
    data = json.loads(to_json(run))
    data["nodes"][1][6] = 0.5               # a left-out mass the nodes do not add up to
    bad.write_text(json.dumps(data), encoding="utf-8")
    page.goto(f"{server.url}/answers?model=no-such-model-here&tour=0", wait_until="domcontentloaded")
    wait_idle(page)
    upload = page.locator(".st-key-wa_upload input[type=file]")
    upload.set_input_files(str(good))
    page.get_by_text("Showing a saved run of").first.wait_for(timeout=MODEL_TIMEOUT_MS)
    wait_idle(page)
    page.locator(".st-key-wa_tree .main-svg .gtitle").first.wait_for()
    main = page.inner_text('[data-testid="stMain"]')
    assert f"{run.tree.expansions} prefixes expanded" in main
    screenshot(page, "answers_saved_run")
    upload.set_input_files(str(bad))
    page.get_by_text("cannot be opened").first.wait_for(timeout=MODEL_TIMEOUT_MS)
    wait_idle(page)
    errors = page.locator('[data-testid="stAlert"]').all_inner_texts()
    assert any("add up to" in e and "Traceback" not in e for e in errors), errors
    assert_no_exception(page, server)
