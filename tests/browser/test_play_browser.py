"""Play on a trace that is only viewed (an uploaded file), in Chromium: the timer runs in the browser, and
each of its ticks moves the step slider on until the trace's last step, where Play turns itself off.

Reference: the hand-made trace's own number of steps.
"""
from __future__ import annotations

from browser_helpers import STEP_TIMEOUT_MS, assert_no_exception, open_page, upload
from trace_builders import PLAY_PROBS as PROBS, hand_made_trace


def test_play_advances_an_uploaded_trace_to_its_last_step(page, server, tmp_path):
    path = tmp_path / "three-steps.json"
    path.write_text(hand_made_trace().to_json(), encoding="utf-8")
    open_page(page, server, "step_by_step", "max_new_tokens=2")
    upload(page, "sbs_upload", str(path))
    step = page.locator(".st-key-sbs_slider input[type=range]").first
    assert step.get_attribute("value") == "1"
    page.locator(".st-key-sbs_play button").first.click()
    page.wait_for_function(
        """(last) => { const s = document.querySelector('.st-key-sbs_slider input[type=range]');
                       const play = document.querySelector('.st-key-sbs_play button');
                       return s && s.getAttribute('value') === last && play && play.innerText.includes('Play'); }""",
        arg=str(len(PROBS)), timeout=STEP_TIMEOUT_MS, polling=100)     # two ticks; generous on a busy machine
    assert_no_exception(page, server)
