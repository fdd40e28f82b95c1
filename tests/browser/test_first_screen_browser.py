"""In Chromium, what only a browser shows: the 中文 landing on Gemma and the 中文 teacher-forcing demo drawn
(screenshots in artifacts/screenshots/), no Deploy button, the copy-link box whole on the screen and carrying
the step, and figures drawn standalone: a low-ranked candidate's column takes a click, the prompt label of a
long beam tree is whole, Compare's ✕ marks are named in the legend.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from browser_helpers import SCREENSHOTS, act, assert_no_exception, open_page, screenshot, wait_idle

ROOT = Path(__file__).resolve().parents[2]
ZH_PROMPT = "中国的首都是"
CJK = re.compile(r"[\u4e00-\u9fff]")


def texts(lang: str, section: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


def sidebar_prompt(page) -> str:
    return page.locator('[data-testid="stSidebar"] .st-key-prompt textarea').first.input_value()


# ---- the Chinese reader --------------------------------------------------------------------------
def test_lang_zh_lands_on_gemma_with_a_chinese_prompt(page, server):
    open_page(page, server, "step_by_step", "lang=zh&tour=0")
    assert_no_exception(page, server)
    page.locator('[class*="st-key-sbs_chart"] .js-plotly-plot').first.wait_for()
    assert sidebar_prompt(page) == ZH_PROMPT
    assert page.locator('[data-testid="stSidebar"] .st-key-model input').first.input_value() == "gemma3-270m"
    ticks = page.locator('[class*="st-key-sbs_chart"] .xtick text').evaluate_all("els => els.map(e => e.textContent)")
    shot = screenshot(page, "zh_landing_step_by_step")
    assert sum(bool(CJK.search(t)) for t in ticks) >= 10, (ticks, shot)     # a model that writes Chinese


@pytest.mark.parametrize("link", ["link_teacher", "link_scheduled"])
def test_the_chinese_teacher_demos_draw_exposure_bias(page, server, link):
    open_page(page, server, "interview", "lang=zh&tour=0")
    label = texts("zh", "interview")[link]
    act(page, lambda: page.get_by_role("link", name=re.compile(re.escape(label))).first.click())
    wait_idle(page)
    assert_no_exception(page, server)
    assert "/teacher_forcing" in page.url
    page.locator('[class*="st-key-tf_forced_chart"] .js-plotly-plot').first.wait_for()
    page.locator('[class*="st-key-tf_kl_chart"] .js-plotly-plot').first.wait_for()    # the free run parted
    reference = page.locator('.st-key-tf_reference textarea').first.input_value()
    assert CJK.search(reference) and "Paris" not in reference, reference
    assert page.locator('[data-testid="stAlertContentWarning"]').count() == 0
    screenshot(page, f"zh_teacher_demo_{link}")


# ---- the toolbar and the copy-link box -------------------------------------------------------------
def test_visitors_get_no_deploy_button(page, server):
    open_page(page, server, "interview", "lang=en&tour=0")
    page.locator('[data-testid="stToolbar"]').first.wait_for(state="attached")
    assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
    assert page.get_by_role("button", name=re.compile(r"^Deploy")).count() == 0


def open_copy_link(page):
    """Open the sidebar's copy-link box and return its body."""
    button = page.locator('[data-testid="stSidebar"] [data-testid="stPopover"] button').filter(
        has_text=texts("en", "common")["copy_link"]).first
    button.click()                      # the box opens in the browser alone: no run to wait for
    body = page.locator('[data-testid="stPopoverBody"]').first
    body.wait_for()
    page.wait_for_timeout(300)          # the box settles into place (an animation, not a wait for the app)
    return body


def test_the_copy_link_box_is_whole_on_the_screen_and_carries_the_step(page, server):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 720})       # a laptop, or a room's projector
    open_page(page, server, "step_by_step", "lang=en&tour=0&max_new_tokens=6")
    assert_no_exception(page, server)
    # the stepping buttons' labels whole beside their shortcut hints (Reset read "R… Home" at this width, and in
    # Chinese Back and Next read "上…" and "下…")
    assert cut_labels(page) == []
    for _ in range(2):
        act(page, lambda: page.locator(".st-key-sbs_next button").first.click())
    body = open_copy_link(page)
    code = body.locator("code").first
    box, height = code.bounding_box(), page.viewport_size["height"]
    hidden = body.evaluate("e => e.scrollHeight - e.clientHeight")
    page.screenshot(path=str(SCREENSHOTS / "copy_link_box.png"))      # the screen as it is, not grown
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, (box, height)     # the whole link on the screen
    assert hidden <= 1, f"{hidden} px of the box are cut off"
    link = code.inner_text()
    assert re.search(r"[?&]step=3(&|$)", link), link
    open_page(page, server, "step_by_step", "lang=zh&tour=0&max_new_tokens=6")
    assert cut_labels(page) == []


def cut_labels(page) -> list:
    """The texts of the stepping buttons' labels that the button cuts short (an ellipsis)."""
    return page.evaluate("""() => [...document.querySelectorAll('[class*="st-key-sbs_"] button .stMarkdownEllipsis')]
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)""")


# ---- figures, drawn standalone ------------------------------------------------------------------------
CLICKS = """() => { const gd = document.querySelector('.js-plotly-plot'); window.__clicked = null;
    gd.on('plotly_click', (d) => { window.__clicked = d.points.map(p => p.customdata); }); }"""


def show_figure(browser, fig):
    from ui.export import figure_html

    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.set_content(figure_html(fig))
    page.locator(".js-plotly-plot .main-svg").first.wait_for()
    return page


def plot_area(page) -> dict:
    return page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()


def test_a_rank_3_candidate_is_clicked_halfway_up_its_column(browser):
    import math

    from engine import Candidate, Step
    from figures.candidates import candidates_figure

    probs = [0.9, 0.05, 0.008, 0.004, 0.002]
    cands = [Candidate(token_id=100 + i, text=f"tok{i + 1}", logit=math.log(p), prob=p, logprob=math.log(p),
                       rank=i + 1, shaped_prob=p, kept=True) for i, p in enumerate(probs)]
    step = Step(index=0, candidates=cands, entropy=0.5, shaped_entropy=0.5, removed_mass=0.0, kept_count=5,
                chosen_ids=[100], chosen_texts=["tok1"])
    page = show_figure(browser, candidates_figure(step))
    try:
        page.evaluate(CLICKS)
        area = plot_area(page)
        tick = page.locator(".xtick text").filter(has_text="3. tok3").first.bounding_box()
        x = tick["x"] + tick["width"]            # a label turned -45° ends under its column
        bar_px = 0.008 / 0.9 * area["height"]
        assert bar_px < 10                                  # the bar itself is a few pixels tall
        page.mouse.click(x, area["y"] + area["height"] * 0.5)
        page.wait_for_timeout(200)
        clicked = page.evaluate("window.__clicked")
        assert clicked and 102 in clicked, clicked
    finally:
        page.close()


def test_the_prompt_label_of_an_80_step_tree_is_whole(browser, llama, monkeypatch):
    from engine import DecodeConfig, decode
    from figures.beam_tree import beam_tree_figure

    monkeypatch.setattr(llama, "eos_token_ids", ())            # no end of text: all 80 steps
    trace = decode(llama, "The capital of", DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=80))
    assert len(trace.steps) == 80
    page = show_figure(browser, beam_tree_figure(trace))
    try:
        label = page.locator(".scatterlayer text").filter(has_text=re.compile(r"^prompt$")).first
        box, area = label.bounding_box(), plot_area(page)
        assert box["x"] >= area["x"] - 0.5, (box, area)       # nothing of it left of the plot, where it was cut
    finally:
        page.close()


def test_compares_cross_marks_are_named_in_the_legend(browser, llama):
    from engine import DecodeConfig, decode
    from figures.compare import lanes_figure

    greedy = decode(llama, "The capital of", DecodeConfig(strategy="greedy", max_new_tokens=6))
    hot = decode(llama, "The capital of", DecodeConfig(strategy="sample", temperature=2.0, max_new_tokens=6, seed=3))
    fig = lanes_figure([("greedy", greedy), ("sample", hot)], {"sample": 0},
                       texts={"parts": texts("zh", "compare")["fig_parts"]})
    page = show_figure(browser, fig)
    try:
        legend = page.locator(".legendtext").evaluate_all("els => els.map(e => e.textContent)")
        assert texts("zh", "compare")["fig_parts"] in legend, legend
    finally:
        page.close()
