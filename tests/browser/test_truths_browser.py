"""In Chromium: what the pages say is true as a reader sees it.

A chart title that names a chosen token ranked below the top 20, the eps strip's count of swapped
positions, and the interview page's sentence on beam search. (That heavy pages open short is a widget's value,
checked in AppTest: tests/ui/test_first_screen.py.)
"""
from __future__ import annotations

import re

import pytest
from browser_helpers import assert_no_exception, open_page


def metric(page, label: str) -> str:
    """The value a st.metric with this label shows."""
    box = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def test_a_chosen_token_below_the_top_20_is_named_in_the_title_with_its_rank(page, server):
    # temperature 2 at seed 0 draws a token far below the top 20 at step 1 on the bundled model
    open_page(page, server, "step_by_step", "lang=en&tour=0&strategy=sample&temperature=2&seed=0&max_new_tokens=4")
    assert_no_exception(page, server)
    title = page.locator('[class*="st-key-sbs_chart"] .gtitle').first
    title.wait_for()
    found = re.search(r"top (\d+) candidates \+ the chosen token \(rank ([\d,]+)\)", title.text_content())
    assert found, title.text_content()
    shown, rank = int(found[1]), int(found[2].replace(",", ""))
    assert rank > shown == 20
    assert rank == int(metric(page, "Chosen token's rank").replace(",", ""))
    bars = page.locator('[class*="st-key-sbs_chart"] .barlayer .trace').first.locator(".point")
    assert bars.count() == shown + 1             # the top 20, and the chosen token after them


def test_the_eps_strip_gives_the_count_of_swapped_positions(page, server):
    open_page(page, server, "teacher_forcing", "lang=en&tour=0&max_new_tokens=12")
    assert_no_exception(page, server)
    title = page.locator('[class*="st-key-tf_strip_chart"] .gtitle').first
    title.wait_for()
    found = re.search(r"eps = [\d.]+: (\d+) of (\d+) positions", title.text_content())
    assert found, title.text_content()
    swapped, positions = int(found[1]), int(found[2])
    assert 0 <= swapped <= positions
    assert metric(page, "Positions swapped") == f"{swapped}/{positions}"
    assert "about half" not in page.locator('[data-testid="stMain"]').inner_text()


@pytest.mark.parametrize("lang,words", [
    ("en", "ranks discrete prefixes by their cumulative log-probability"),
    ("zh", "按累计对数概率给离散的前缀排序"),
])
def test_the_interview_page_says_beam_search_ranks_discrete_prefixes(page, server, lang, words):
    open_page(page, server, "interview", f"lang={lang}&tour=0")
    assert_no_exception(page, server)
    page.get_by_text(words).first.wait_for()
