"""A 64-step run as a lesson file: its size, and the time to its first chart after Chromium opens it from disk.

    .venv/bin/python -m bench.bench_lesson [--trace FILE] [--opens 5]

Without --trace, the bundled SmolLM2 samples 64 tokens (temperature 0.8, top-p 0.9, 20 candidates a step: the
app's defaults for what a step records). The lesson is written with `python -m engine lesson`'s own function and
opened --opens times in headless Chromium, each in a fresh context (no cache), every request but the file's
refused. Reported: the file's size (the plotly.js bundle's share, and the lesson data's), and the median and worst
time from navigation start to the first chart drawn (window.lessonFirstChart, set when Plotly's first draw
resolves), with the machine's load. The goals: at most 1.6 MB, and the first chart within 0.5 s.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "browser"), str(ROOT)]


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def sample_run():
    from engine import DecodeConfig, decode, load_model

    lm = load_model(None)
    for seed in range(1, 20):         # the first seed whose run does not end (at the end-of-text) before 64 tokens
        trace = decode(lm, "Write a long story about a lighthouse keeper.", DecodeConfig(
            strategy="sample", temperature=0.8, top_p=0.9, max_new_tokens=64, top_n=20, seed=seed, chat=True))
        if len(trace.steps) == 64:
            return trace
    return trace


def first_chart_ms(path: Path, opens: int) -> list:
    from playwright.sync_api import sync_playwright

    from browser_helpers import CHROMIUM, CHROMIUM_ARGS

    times, refused = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for _ in range(opens):
            context = browser.new_context(viewport={"width": 1280, "height": 720})
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                          else (refused.append(route.request.url), route.abort()))
            page = context.new_page()
            page.goto(path.as_uri())
            page.wait_for_function("() => window.lessonFirstChart > 0")
            times.append(page.evaluate("[window.lessonScriptStart, window.lessonFirstChart]"))
            context.close()
        browser.close()
    if refused:
        raise SystemExit(f"the lesson asked for {len(refused)} addresses: {refused[:3]}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="a trace file to use instead of a fresh 64-step run")
    parser.add_argument("--opens", type=int, default=5)
    args = parser.parse_args()
    from engine import Trace
    from engine.lesson import lesson_html
    from engine.lesson.bundle import lesson_bundle

    trace = Trace.from_json(Path(args.trace).read_bytes()) if args.trace else sample_run()
    html = lesson_html(trace)
    size = len(html.encode("utf-8"))
    bundle, name = lesson_bundle()
    data = re.search(r'id="lesson-data">(.*?)</script>', html, re.S).group(1)
    path = Path(tempfile.mkdtemp()) / "lesson.html"
    path.write_text(html, encoding="utf-8")
    times = first_chart_ms(path, args.opens)
    plotly_ready = [start for start, _ in times]
    times = [chart for _, chart in times]
    parts = (len(bundle.encode()), len(data.encode()))
    print(f"{len(trace.steps)} steps, {max(len(s.candidates) for s in trace.steps)} candidates a step "
          f"(trace JSON {len(trace.to_json().encode()) / 1e6:.2f} MB)")
    print(f"lesson {size / 1e6:.3f} MB ({size:,} B): {name} {parts[0] / 1e6:.3f} MB, "
          f"lesson data {parts[1] / 1e3:.0f} KB, page and script {(size - sum(parts)) / 1e3:.0f} KB")
    print(f"first chart after opening: median {statistics.median(times) / 1e3:.3f} s, worst {max(times) / 1e3:.3f} s "
          f"over {len(times)} opens ({load()}); plotly.js parsed and started by "
          f"{statistics.median(plotly_ready) / 1e3:.3f} s (median)")


if __name__ == "__main__":
    main()
