"""A classroom on one machine: eight browser sessions decode on the shared bundled model at once.

    .venv/bin/python -m bench.load_classroom [--sessions 8] [--tokens 32] [--url http://host:port]

Without --url it starts `streamlit run app.py` on a free port (and stops it at the end).
Each session opens the Compare page with one sampled lane (temperature 0.8) of
--tokens tokens, with its own prompt and seed; sessions 0 and 1 share prompt and
seed on purpose. It checks that every session finishes without an exception, shows
its own prompt and exactly the tokens the engine samples in this process for that
prompt and seed (so no session sees another's result, and no global RNG or shared
state leaks between them), and that the two twins show identical text. It prints the
median and worst time per session (page open to the lane's text on screen; the page
also decodes a greedy reference lane of the same length) and the server's RSS: right
after start, after one session, and after all sessions.

The plan and the checks are shared with tests/browser/test_room_browser.py, which asserts them on the eight
students of a room (two processes; the one that takes every student when the other dies is the one whose
memory is compared); timings are only printed here, never asserted.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from tests.browser.browser_helpers import (CHROMIUM, CHROMIUM_ARGS, MODEL_TIMEOUT_MS, QUIET_MS, exception_texts,
                                           new_context, running_server)

if TYPE_CHECKING:       # for annotations only: main() imports the engine when it runs
    from engine import LoadedModel

TEMPERATURE = 0.8
LANE = ".st-key-cmp_lane_temperature"
TOPICS = ["a lighthouse keeper", "the history of bread", "a robot learning to paint", "volcanoes",
          "a chess tournament", "the moon landing", "a library at night", "migrating birds", "the ocean floor",
          "a busy train station", "quantum computers", "a mountain village"]


@dataclass
class Session:
    index: int
    prompt: str
    seed: int
    page: object = None
    context: object = None
    started: float = 0.0
    seconds: float | None = None
    tokens: list = field(default_factory=list)
    shown_prompt: str = ""
    rereads: int = 0
    errors: list = field(default_factory=list)


def plan(sessions: int) -> list:
    """Sessions 0 and 1 are twins (same prompt, same seed); the others differ in both."""
    out = []
    for i in range(sessions):
        if i == 1:
            out.append(Session(1, out[0].prompt, out[0].seed))
        else:
            out.append(Session(i, f"Student {i} writes a short story about {TOPICS[i % len(TOPICS)]}:", 1000 + i))
    return out


def session_url(base: str, s: Session, tokens: int) -> str:
    query = urlencode({"lanes": "temperature", "cmp_temperature": TEMPERATURE, "prompt": s.prompt, "seed": s.seed,
                       "max_new_tokens": tokens})
    return f"{base}/compare?{query}"


IDLE_JS = """(quiet) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || window.__dsRuns === undefined) return false;
    return window.__dsRuns > 0 && app.getAttribute('data-test-script-state') === 'notRunning'
        && app.getAttribute('data-test-connection-state') === 'CONNECTED'
        && performance.now() - window.__dsChanged > quiet
        && !document.querySelector('[data-stale="true"]');
}"""


def lane_tokens(page) -> list:
    titles = page.locator(f"{LANE} span[title^='step ']").evaluate_all("els => els.map(e => e.title)")
    return [t.split(": ", 1)[1].split(" · p = ")[0] for t in titles]


def expected_tokens(lm: LoadedModel, s: Session, tokens: int) -> list:
    from engine import DecodeConfig
    from engine import decode
    from figures.labels import visible

    trace = decode(lm, s.prompt, DecodeConfig(strategy="sample", temperature=TEMPERATURE, seed=s.seed,
                                              max_new_tokens=tokens, top_n=20))
    return [visible(st.chosen_texts[0]) for st in trace.steps]


def run_sessions(browser, base: str, sessions: list, tokens: int, timeout_s: float = MODEL_TIMEOUT_MS / 1000) -> None:
    """Open every session at once, then poll them all until each has finished its run."""
    for s in sessions:
        s.context = new_context(browser)
        s.page = s.context.new_page()
    for s in sessions:                        # goto returns once the HTML is in; the runs overlap on the server
        s.started = time.perf_counter()
        s.page.goto(session_url(base, s, tokens), wait_until="commit")
    limit = timeout_s * max(2, len(sessions) / 2)    # generous: the first session also waits for the model load
    # Eight sessions decoding on two cores delay the server's messages: a run that starts another can reach the
    # page well after the 20 ms seen on a quiet machine, so "done" asks for a longer quiet time here.
    quiet = QUIET_MS * max(1, len(sessions) / 2)
    deadline = time.monotonic() + limit
    pending = list(sessions)
    while pending and time.monotonic() < deadline:
        for s in list(pending):
            try:
                done = s.page.evaluate(IDLE_JS, quiet)
            except Exception:   # noqa: BLE001 - the page is still navigating
                done = False
            if done:
                s.seconds = time.perf_counter() - s.started - quiet / 1000
                pending.remove(s)
        time.sleep(0.2)
    for s in pending:
        s.errors.append(f"did not finish within {limit:.0f} s")
    for s in sessions:
        if s.seconds is None:
            continue
        read_settled(s, quiet)


def read_settled(s: Session, quiet: float, tries: int = 3) -> None:
    """What the session shows once it has settled: read again after a quiet spell while the prompt is not its own.

    The last reading is kept, so a session that goes on showing another prompt (or none) is reported."""
    for attempt in range(tries):
        if attempt:
            s.rereads += 1
            s.page.wait_for_timeout(quiet)
            s.page.wait_for_function(IDLE_JS, arg=quiet, timeout=MODEL_TIMEOUT_MS, polling=200)
        s.tokens = lane_tokens(s.page)
        s.shown_prompt = s.page.locator("[data-testid='stSidebar'] .st-key-prompt textarea").first.input_value()
        if s.shown_prompt == s.prompt:
            break
    s.errors.extend(exception_texts(s.page))


def close_sessions(sessions: list) -> None:
    for s in sessions:
        if s.context is not None:
            s.context.close()
            s.context = None


def check(sessions: list, expected: dict, tokens: int) -> list:
    """Problems found (empty when the classroom behaved)."""
    problems = []
    for s in sessions:
        problems += [f"session {s.index}: {e}" for e in s.errors]
        if s.seconds is None:
            continue
        if s.shown_prompt != s.prompt:
            problems.append(f"session {s.index} shows the prompt {s.shown_prompt!r}, not its own {s.prompt!r}")
        want = expected[(s.prompt, s.seed)]
        if s.tokens != want:
            problems.append(f"session {s.index} shows {''.join(s.tokens)!r}, the engine samples {''.join(want)!r}")
        if not s.tokens or len(s.tokens) > tokens:
            problems.append(f"session {s.index} shows {len(s.tokens)} tokens (asked for {tokens})")
    twins = [s for s in sessions if s.index in (0, 1)]
    if len(twins) == 2 and twins[0].tokens != twins[1].tokens:
        problems.append("the twin sessions (same prompt, seed and settings) show different text")
    return problems


def rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def classroom(browser, base: str, server_pid: int | None, lm: LoadedModel, sessions: int, tokens: int,
              report=print) -> dict:
    """Warm up with one session, then run all at once. Returns figures and problems."""
    figures = {"sessions": sessions, "tokens": tokens}
    if server_pid:
        figures["rss_start_mb"] = rss_mb(server_pid)
    solo = plan(1)
    solo[0].prompt, solo[0].seed = "A single student asks about the weather:", 7
    expected = {(solo[0].prompt, solo[0].seed): expected_tokens(lm, solo[0], tokens)}
    run_sessions(browser, base, solo, tokens)
    figures["one_session_s"] = solo[0].seconds
    if server_pid:
        figures["rss_one_session_mb"] = rss_mb(server_pid)
    problems = check(solo, expected, tokens)
    close_sessions(solo)

    group = plan(sessions)
    for s in group:
        if (s.prompt, s.seed) not in expected:
            expected[(s.prompt, s.seed)] = expected_tokens(lm, s, tokens)
    t0 = time.perf_counter()
    run_sessions(browser, base, group, tokens)
    figures["wall_s"] = time.perf_counter() - t0
    if server_pid:
        figures["rss_all_sessions_mb"] = rss_mb(server_pid)
    problems += check(group, expected, tokens)
    times = [s.seconds for s in group if s.seconds is not None]
    figures["median_s"] = statistics.median(times) if times else None
    figures["worst_s"] = max(times) if times else None
    figures["finished"] = len(times)
    figures["problems"] = problems
    figures["rereads"] = {s.index: s.rereads for s in group if s.rereads}
    figures["twin_text"] = "".join(group[0].tokens) if group else ""
    close_sessions(group)
    return figures


def print_figures(f: dict) -> None:
    print(f"sessions: {f['finished']}/{f['sessions']} finished, {f['tokens']} tokens each")
    if f.get("one_session_s") is not None:
        print(f"one session alone: {f['one_session_s']:.1f} s")
    if f.get("median_s") is not None:
        print(f"{f['sessions']} at once: median {f['median_s']:.1f} s, worst {f['worst_s']:.1f} s per session "
              f"(wall {f['wall_s']:.1f} s)")
    if "rss_start_mb" in f:
        print(f"server RSS: {f['rss_start_mb']:.0f} MB at start, {f['rss_one_session_mb']:.0f} MB after one session, "
              f"{f['rss_all_sessions_mb']:.0f} MB after {f['sessions']} sessions "
              f"(+{f['rss_all_sessions_mb'] - f['rss_one_session_mb']:.0f} MB for the extra sessions; goal < 300 MB)")
    print(f"twin sessions' text: {f['twin_text']!r}")
    if f.get("rereads"):
        print(f"read again after a quiet spell (the prompt was not yet its own): sessions {f['rereads']}")
    print("problems: " + ("none" if not f["problems"] else "\n  " + "\n  ".join(f["problems"])))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--url", help="an app already running (its memory is then not measured)")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    from engine import load_model

    lm = load_model()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            if args.url:
                figures = classroom(browser, args.url.rstrip("/"), None, lm, args.sessions, args.tokens)
            else:
                import tempfile

                with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as srv:
                    figures = classroom(browser, srv.url, srv.pid, lm, args.sessions, args.tokens)
        finally:
            browser.close()
    print_figures(figures)
    return 1 if figures["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
