"""Hostile trace files in a real browser, on Step by step, Beam tree and Compare: what only a browser shows.

AppTest (tests/ui/test_hostile_uploads.py) uploads every file of tests/hostile_traces.py on every page that opens
a trace and checks it whole: one message with the case's words, no exception, the live result kept, no markup
left unescaped in what the page sends. What AppTest cannot see is what Chromium does with that text and with a
real upload, so the browser gets only the files where that matters: every file that carries markup or a
tracking address (Markdown images, <img> tags), on all three pages, and every heavy file (over 256 KiB), on Step
by step, through the server's real upload path. After each one: no exception element is on the page, no request
has left the page for any other host, no image or javascript: link was made from the file's text, the live result
shown before is still shown, and the server still answers its health check; nothing the server logged meanwhile
is a traceback.

The server's peak memory is sampled while the three pages open and draw their live results (the session's
normal work), then over the hostile uploads on those pages; both figures are written to
artifacts/hostile_memory.json.
"""
from __future__ import annotations

import json
import threading
import urllib.request
from urllib.parse import urlencode, urlsplit

import pytest

import hostile_traces
from browser_helpers import (ROOT, assert_no_exception, new_context, open_page, screenshot, shown_tokens, upload,
                             wait_chart, wait_idle)
from engine import DecodeConfig, decode
from figures.labels import WORD_JOINER

pytestmark = pytest.mark.browser

PAGES = {   # page: (uploader key, query for a small live result)
    "step_by_step": ("sbs_upload", {"prompt": "The capital of France is", "max_new_tokens": 6}),
    "beam_tree": ("beam_upload", {"prompt": "The capital of France is", "max_new_tokens": 4, "num_beams": 2}),
    "compare": ("cmp_upload", {"prompt": "The capital of France is", "max_new_tokens": 5, "lanes": "greedy,top_p"}),
}
ERROR = "[data-testid='stAlertContentError']"
ALERT = "[data-testid='stAlert']"
HEAVY_BYTES = 256 * 1024


@pytest.fixture(scope="module")
def real_traces(bundled):
    greedy = decode(bundled, "The capital of France is", DecodeConfig(strategy="greedy", max_new_tokens=6))
    beam = decode(bundled, "The capital of France is", DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=4))
    return greedy, beam


class PeakMemory:
    """Samples a process's resident memory every 50 ms in a thread; `peak_mb` is the largest seen."""

    def __init__(self, pid: int):
        import psutil

        self.process, self.peak_mb, self._stop = psutil.Process(pid), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self.process.memory_info().rss / 2**20)
            self._stop.wait(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def outside_requests(context, server) -> list:
    """A list that fills with every request the pages make to anything but the app's own server."""
    own = urlsplit(server.url).netloc
    seen = []

    def record(request):
        url = urlsplit(request.url)
        if url.scheme not in ("data", "blob", "about") and url.netloc != own:
            seen.append(request.url)

    context.on("request", record)
    return seen


def live_result(page):
    """What the page shows as its result: the coloured tokens, and the text drawn in its charts."""
    charts = page.locator("[data-testid='stPlotlyChart'] .main-svg").evaluate_all(
        "els => els.map(e => e.textContent)")
    return shown_tokens(page), charts


def healthy(server) -> bool:
    with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=30) as response:
        return response.status == 200


def browser_cases(files: list, which: int) -> list:
    """The files page number `which` (0, 1, 2) gets in the browser: each one with markup in it (what could become
    a request or an element), and on the first page each heavy one too (the server's memory peak). The others'
    messages hold numbers and names: AppTest checks each of them whole on every page."""
    return [case for case in files if hostile_traces.PIXEL.encode() in case.payload
            or (which == 0 and len(case.payload) > HEAVY_BYTES)]


def check_refused(page, name, case, before):
    assert_no_exception(page)
    errors = page.locator(ERROR).all_inner_texts()
    assert len(errors) == 1 and all(words in errors[0] for words in case.words), (name, case.name, errors)
    assert live_result(page) == before, f"{name}: the live result changed after {case.name}"
    assert_nothing_made_of_markup(page)


def check_shown(page, name, case, before):
    assert_no_exception(page)
    errors = page.locator(ERROR).all_inner_texts()
    success = page.locator("[data-testid='stAlertContentSuccess']").all_inner_texts()
    if name == "beam_tree" and "greedy" in case.name:
        # a decode has no beam tree: the page says so, and only that (no success beside the error)
        assert len(errors) == 1 and not success, (errors, success)
    else:
        assert not errors, (name, case.name, errors)
        main = page.locator("[data-testid='stMain']").text_content()
        assert "<img" in main, (name, case.name)          # the markup shows as text
        # the model name, as written (an invisible word joiner keeps its addresses from becoming links)
        assert any(hostile_traces.MARKUP in text.replace(WORD_JOINER, "") for text in success), success
    assert_nothing_made_of_markup(page)


def assert_nothing_made_of_markup(page):
    assert page.locator("a[href^='javascript']").count() == 0       # [link](javascript:...) stays text
    assert page.locator("[data-testid='stMain'] img[src*='pixel'], [data-testid='stSidebar'] img[src*='pixel']"
                        ).count() == 0


def test_hostile_uploads_on_three_pages(browser, server, real_traces):
    greedy, beam = real_traces
    refused = hostile_traces.refused(greedy, beam)
    accepted = hostile_traces.accepted(greedy, beam)
    logged = len(server.log_text())
    context = new_context(browser, server)
    outside = outside_requests(context, server)
    sent = 0
    try:
        # the session's normal work first: the three pages open and draw their live results (on a fresh server
        # the first also loads the model), its peak the baseline
        pages, before = {}, {}
        with PeakMemory(server.pid) as normal_peak:
            for name, (_, query) in PAGES.items():
                pages[name] = page = context.new_page()
                open_page(page, server, name, urlencode(query))
                wait_chart(page)
                wait_idle(page)
                before[name] = live_result(page)
        # then the hostile files on those pages: the refused ones first (their check compares with the live
        # result), then the whole ones with markup in every text
        with PeakMemory(server.pid) as hostile_peak:
            for which, (name, (key, _)) in enumerate(PAGES.items()):
                page = pages[name]
                for files, check, is_refused in ((refused, check_refused, True), (accepted, check_shown, False)):
                    for case in browser_cases(files, which):
                        named = page.locator(ALERT, has_text=f"{case.name}.json")
                        # a file the page cannot show gets the page's one error, which names no file (the errors
                        # still on the page from the refused phase each name theirs)
                        unnamed = page.locator(ERROR).filter(has_not_text=".json")
                        upload(page, key, {"name": f"{case.name}.json", "mimeType": "application/json",
                                           "buffer": case.payload}, shows=named if is_refused else named.or_(unnamed))
                        check(page, name, case, before[name])
                        assert not outside, (name, case.name, outside)
                        assert healthy(server), (name, case.name)
                        sent += 1
                screenshot(page, f"hostile_uploads_{name}")
    finally:
        context.close()
    log = server.log_text()[logged:]
    assert "Traceback" not in log, log[-3000:]

    figures = {"normal_session_peak_mib": round(normal_peak.peak_mb),
               "hostile_run_peak_mib": round(hostile_peak.peak_mb), "browser_uploads": sent, "pages": list(PAGES)}
    out = ROOT / "artifacts" / "hostile_memory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))
    print(figures)
    # every file is at most a few MB and refused or read in one pass: the hostile run costs about what a
    # normal session does, never the gigabytes that took the server down
    assert hostile_peak.peak_mb < normal_peak.peak_mb + 512, figures
