"""Step by step in Chromium: Next reruns only the stepper's fragment (AppTest runs whole pages, so only a
browser shows this path): the chart shows the new step, the text grows by one token per Next, and the
sidebar's prompt box is left as it was. And the press draws the next (or, for Back, the previous) step's
chart, sent ahead, before the server answers it (the server's messages held back here): the rest of the step
follows with that answer."""
from __future__ import annotations

import re

from browser_helpers import act, assert_no_exception, open_page, wait_idle

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


def hold_back_the_server(page) -> dict:
    """Route the page's websocket through here; while held["on"], what the server sends waits in held["queue"]
    until release(held)."""
    held = {"on": False, "queue": [], "route": None}

    def route(ws):
        to_server = ws.connect_to_server()
        held["route"] = ws
        to_server.on_message(lambda message: held["queue"].append(message) if held["on"] else ws.send(message))
        ws.on_message(lambda message: to_server.send(message))

    page.route_web_socket(re.compile(r".*/_stcore/stream"), route)
    return held


def release(held) -> None:
    held["on"] = False
    while held["queue"]:
        held["route"].send(held["queue"].pop(0))


def chart_shows(page, step: int) -> None:
    page.wait_for_function(f"() => document.querySelector('{TITLE}')?.textContent.startsWith('Step {step}:')")


def release_and_settle(page, server, held, tokens: int, step: int) -> None:
    """Let the held answer through; once the text has `tokens` tokens and the run has ended, the chart is on
    `step` and there is no exception."""
    release(held)
    page.wait_for_function(f"() => document.querySelectorAll(\"span[title^='step ']\").length === {tokens}")
    wait_idle(page)       # the released run's end (no new run is asked for: waiting for one would wait in vain)
    assert_no_exception(page, server)
    assert page.locator(TITLE).first.text_content().startswith(f"Step {step}:")


def test_the_press_draws_the_chart_sent_ahead_before_the_server_answers(page, server):
    held = hold_back_the_server(page)
    open_page(page, server, "step_by_step", f"prompt={PROMPT.replace(' ', '+')}&max_new_tokens=6&tour=0")
    page.locator(TITLE).first.wait_for()
    page.wait_for_function("() => window.__dsUpcoming?.sbs_chart_next?.figure")     # step 2's chart, sent ahead
    tokens = page.locator("span[title^='step ']")
    assert tokens.count() == 1

    held["on"] = True
    page.locator(".st-key-sbs_next button").first.click()
    chart_shows(page, 2)
    assert tokens.count() == 1                             # drawn ahead: the step's run has not reached the page
    # a second press before the answer: nothing is drawn ahead of step 2 (what was sent followed step 1)
    page.locator(".st-key-sbs_next button").first.click()
    page.wait_for_timeout(500)
    assert page.locator(TITLE).first.text_content().startswith("Step 2:") and tokens.count() == 1

    release_and_settle(page, server, held, tokens=3, step=3)

    # Next's key (→) draws the step sent ahead as the click does; typed in the prompt box, it moves the caret
    page.wait_for_function("() => window.__dsUpcoming?.sbs_chart_next?.figure")
    held["on"] = True
    page.locator('[data-testid="stSidebar"] textarea').first.press("ArrowRight")
    page.wait_for_timeout(500)
    assert page.locator(TITLE).first.text_content().startswith("Step 3:")
    page.locator(".st-key-sbs_next button").first.focus()
    page.keyboard.press("ArrowRight")
    chart_shows(page, 4)
    assert tokens.count() == 3
    release_and_settle(page, server, held, tokens=4, step=4)
    titles = tokens.evaluate_all("els => els.map(e => e.title)")
    assert [int(re.match(r"step (\d+):", t).group(1)) for t in titles] == [1, 2, 3, 4]

    # Back: the step before, sent ahead too
    page.wait_for_function("() => window.__dsUpcoming?.sbs_chart_back?.figure")
    held["on"] = True
    page.locator(".st-key-sbs_back button").first.click()
    chart_shows(page, 3)
    assert tokens.count() == 4
    release_and_settle(page, server, held, tokens=3, step=3)
