"""A model on a llama.cpp server in the real app: a link fills in the address, Connect decodes, and the
chart shows the badge and the 'other' bar (the share the server's top-N leaves out)."""
from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_no_exception, chart_texts, click_key, open_page, screenshot
from figures.labels import WORD_JOINER

pytestmark = pytest.mark.browser


def test_a_served_model_shows_its_badge_and_the_other_bar(page, server, llama_server):
    open_page(page, server, "step_by_step", f"server={quote(llama_server, safe='')}&max_new_tokens=3&top_n=8")
    assert_no_exception(page, server)
    box = page.locator("[data-testid='stSidebar'] .st-key-server input")
    expect(box).to_have_value(llama_server, timeout=30_000)     # on a loaded machine the sidebar may still be drawing
    assert page.locator(".js-plotly-plot").count() == 0          # nothing decoded before the click
    click_key(page, "served_connect")
    assert_no_exception(page, server)
    badge = page.locator("[data-testid='stAlertContentInfo']").filter(has_text="top-8 from llama-cpp-python")
    assert badge.count() == 1
    text = badge.inner_text().replace(WORD_JOINER, "")
    assert (f"top-8 from llama-cpp-python at {llama_server}, raw numbers (before its sampler): the listed tokens "
            "are exact, the other ") in text
    other = re.search(r"the other (\d+\.\d)% is shown as 'other'", text)
    assert other and 0.0 < float(other.group(1)) < 100.0, text
    labels = chart_texts(page, "other (not listed)")
    assert "other (not listed)" in labels, labels                # the x tick of the 'other' bar
    # the badge on the figure itself, in lines of at most 110 characters (a line's end reads as no space)
    shown = "".join(labels).replace(" ", "")
    assert "rawnumbers(beforeitssampler):thelistedtokensareexact" in shown, labels
    assert page.get_by_text(
        "no sampler stages, no logit lens, no KV cache view, no expected embedding").first.is_visible()
    screenshot(page, "served_step_by_step")


def test_the_beam_tree_on_a_served_model_carries_the_badge(page, server, llama_server):
    open_page(page, server, "beam_tree", f"server={quote(llama_server, safe='')}&max_new_tokens=3&num_beams=2")
    assert page.locator(".js-plotly-plot").count() == 0
    click_key(page, "served_connect")
    assert_no_exception(page, server)
    badge = page.locator("[data-testid='stAlertContentInfo']").filter(has_text="top-4 from llama-cpp-python")
    assert badge.count() == 1
    assert "the tree shows only listed tokens" in badge.inner_text()
    labels = chart_texts(page, "top-4 from llama-cpp-python")
    assert any("top-4 from llama-cpp-python" in t for t in labels), labels
    screenshot(page, "served_beam_tree")


def test_the_served_texts_read_in_chinese(page, server, llama_server):
    open_page(page, server, "step_by_step", f"lang=zh&server={quote(llama_server, safe='')}&max_new_tokens=2&top_n=5")
    click_key(page, "served_connect")
    assert_no_exception(page, server)
    badge = page.locator("[data-testid='stAlertContentInfo']").filter(has_text="列出的 token 是精确的")
    assert badge.count() == 1
    labels = chart_texts(page, "其他（未列出）")
    assert "其他（未列出）" in labels, labels
    screenshot(page, "served_step_by_step_zh")


def test_teacher_forcing_on_a_served_model_scores_the_reference(page, server, llama_server):
    open_page(page, server, "teacher_forcing",
              f"server={quote(llama_server, safe='')}&tf_reference={quote(' Paris. It is a big city.')}")
    click_key(page, "served_connect")
    assert_no_exception(page, server)
    badge = page.locator("[data-testid='stAlertContentInfo']").filter(has_text="one request per position")
    assert badge.count() == 1
    assert page.locator("[data-testid='stMetricValue']").count() == 4
    labels = chart_texts(page, "Paris")
    assert any("Paris" in t for t in labels), labels                 # the reference tokens on the x axis
    screenshot(page, "served_teacher_forcing")
