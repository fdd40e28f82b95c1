"""Hostile trace files in a real browser, on Step by step, Beam tree and Compare.

AppTest (tests/ui/test_hostile_uploads.py) uploads every file of tests/hostile_traces.py on every page and checks
the message and the result kept. Here the browser adds what only it shows: every file that carries markup or a
tracking address (Markdown images, <img> tags) goes to all three pages; Step by step also gets every heavy file
(over 256 KiB); each page gets every sixth of the rest, from its own offset, so that the three together see
about half of them. After each one: no exception element is on the page, no request has left the page for any
other host, the live result shown before is still shown, and the server still answers its health check.

The server's peak memory is sampled over one normal session (the same pages, the real traces uploaded) on a
fresh server, then over the hostile run on that server after it; both figures are written to
artifacts/hostile_memory.json.
"""
from __future__ import annotations

import json
import threading
import urllib.request
from urllib.parse import urlencode, urlsplit

import pytest

import hostile_traces
from browser_helpers import (ROOT, assert_no_exception, new_context, open_page, running_server, screenshot,
                             wait_idle)
from engine import DecodeConfig, decode
from figures.labels import WORD_JOINER
from browser_helpers import shown_tokens, upload, wait_chart

pytestmark = pytest.mark.browser

PAGES = {   # page: (uploader key, query for a small live result)
    "step_by_step": ("sbs_upload", {"prompt": "The capital of France is", "max_new_tokens": 6}),
    "beam_tree": ("beam_upload", {"prompt": "The capital of France is", "max_new_tokens": 4, "num_beams": 2}),
    "compare": ("cmp_upload", {"prompt": "The capital of France is", "max_new_tokens": 5, "lanes": "greedy,top_p"}),
}
ERROR = "[data-testid='stAlertContentError']"
ALERT = "[data-testid='stAlert']"


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


def live_result(page, name: str):
    """What the page shows as its result: the coloured tokens, and the text drawn in its charts."""
    charts = page.locator("[data-testid='stPlotlyChart'] .main-svg").evaluate_all(
        "els => els.map(e => e.textContent)")
    return shown_tokens(page), charts


def healthy(server) -> bool:
    with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=30) as response:
        return response.status == 200


HEAVY_BYTES = 256 * 1024


def browser_cases(files: list, which: int) -> list:
    """The files page number `which` (0, 1, 2) gets in the browser: each one with markup in it (what could become
    a request or an element); on the first page also each heavy one (the server's memory peak); and every sixth
    of the rest, from its own offset (the three pages together see about half of them). The rest's messages
    hold numbers and names, checked whole by AppTest on every page."""
    marked = [case for case in files if hostile_traces.PIXEL.encode() in case.payload
              or (which == 0 and len(case.payload) > HEAVY_BYTES)]
    plain = [case for case in files if case not in marked]
    return marked + plain[2 * which::6]


def run_session(browser, server, phases: list, spread: bool = True) -> None:
    """Open each page with its live result, then for each phase (files, check, refused) upload its files (all of
    them unless `spread`) and call check(page, name, case, before). A refused file's message names it (the last
    file's message is still on the page while this one is read); another file's is its own success or the
    page's one error. The refused phase comes first: its check compares with the live result."""
    context = new_context(browser, server)
    outside = outside_requests(context, server)
    try:
        for which, (name, (key, query)) in enumerate(PAGES.items()):
            page = context.new_page()
            open_page(page, server, name, urlencode(query))
            wait_chart(page)
            wait_idle(page)
            before = live_result(page, name)
            for files, check, refused in phases:
                for case in browser_cases(files, which) if spread else files:
                    named = page.locator(ALERT, has_text=f"{case.name}.json")
                    # a file the page cannot show gets the page's one error, which names no file (the errors
                    # still on the page from the refused phase each name theirs)
                    unnamed = page.locator(ERROR).filter(has_not_text=".json")
                    upload(page, key, {"name": f"{case.name}.json", "mimeType": "application/json",
                                       "buffer": case.payload}, shows=named if refused else named.or_(unnamed))
                    check(page, name, case, before)
                    assert not outside, (name, case.name, outside)
                    assert healthy(server), (name, case.name)
            screenshot(page, f"hostile_uploads_{name}")
            page.close()
    finally:
        context.close()


def test_hostile_uploads_on_three_pages(browser, real_traces, tmp_path_factory):
    greedy, beam = real_traces
    refused = hostile_traces.refused(greedy, beam)
    accepted = hostile_traces.accepted(greedy, beam)
    normal = [hostile_traces.Case("greedy", greedy.to_json().encode()),
              hostile_traces.Case("beam", beam.to_json().encode())]

    def check_refused(page, name, case, before):
        assert_no_exception(page)
        errors = page.locator(ERROR).all_inner_texts()
        assert len(errors) == 1 and all(words in errors[0] for words in case.words), (name, case.name, errors)
        assert live_result(page, name) == before, f"{name}: the live result changed after {case.name}"

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
        assert page.locator("a[href^='javascript']").count() == 0       # [link](javascript:...) stays text
        assert page.locator("[data-testid='stMain'] img[src*='pixel'], [data-testid='stSidebar'] img[src*='pixel']"
                            ).count() == 0

    # one fresh server: a normal session first, its peak the baseline, then the hostile run's peak over both
    with running_server(tmp_path_factory.mktemp("hostile")) as server:
        with PeakMemory(server.pid) as normal_peak:
            run_session(browser, server, [(normal, lambda page, name, case, before: assert_no_exception(page),
                                           False)], spread=False)
        with PeakMemory(server.pid) as hostile_peak:       # one page load each for both phases
            run_session(browser, server, [(refused, check_refused, True), (accepted, check_shown, False)])
        log = server.log_text()
    assert "Traceback" not in log, log[-3000:]

    figures = {"normal_session_peak_mib": round(normal_peak.peak_mb),
               "hostile_run_peak_mib": round(hostile_peak.peak_mb),
               "hostile_files": len(refused) + len(accepted), "pages": list(PAGES)}
    out = ROOT / "artifacts" / "hostile_memory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))
    print(figures)
    # every file is at most a few MB and refused or read in one pass: the hostile run costs about what a
    # normal session does, never the gigabytes that took the server down
    assert hostile_peak.peak_mb < normal_peak.peak_mb + 512, figures
