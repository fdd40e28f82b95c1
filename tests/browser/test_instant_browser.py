"""Step by step in Chromium: Next reruns only the stepper's fragment (AppTest runs whole pages, so only a
browser shows this path): the chart shows the new step, the text grows by one token per Next, and the
sidebar's prompt box is left as it was."""
from __future__ import annotations

import re

from browser_helpers import act, assert_no_exception, open_page

PROMPT = "The capital of France is"
TITLE = '[class*="st-key-sbs_chart"] .gtitle'


def test_next_in_the_fragment_shows_each_new_step(page, server):
    open_page(page, server, "step_by_step", f"prompt={PROMPT.replace(' ', '+')}&max_new_tokens=6&tour=0")
    assert_no_exception(page, server)
    page.locator(TITLE).first.wait_for()
    assert page.locator(TITLE).first.text_content().startswith("Step 1:")
    prompt_box = page.locator('[data-testid="stSidebar"] textarea').first.element_handle()

    for step in (2, 3):
        act(page, lambda: page.locator(".st-key-sbs_next button").first.click())
        assert_no_exception(page, server)
        assert page.locator(TITLE).first.text_content().startswith(f"Step {step}:")
        assert prompt_box.evaluate("el => el.isConnected && el.value") == PROMPT

    titles = page.locator("span[title^='step ']").evaluate_all("els => els.map(e => e.title)")
    assert [int(re.match(r"step (\d+):", t).group(1)) for t in titles] == [1, 2, 3]
