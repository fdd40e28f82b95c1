"""What a user waits for in the browser: the app on a local server, driven by Playwright in Debian's Chromium.

    .venv/bin/python -m bench.bench_browser [--clicks 20] [--opens 5] [--crowd 20] [--play-seconds 8] [--plain]
                                            [--pages teacher_forcing,expected_embedding]

The server starts as `make run` starts it (python -m ui.serve: the first model loads as the server starts);
--plain starts `streamlit run app.py` instead, where the first visit loads it.

--crowd 0 leaves out the shared link (3), --play-seconds 0 leaves out Play (4).

1. Next -> the chart shows the new step (median of --clicks): on the page's own clock, from the pointer going
   down on the button to the chart's title changing (what a reader waits for; the driver's click call adds
   Playwright's checks of the button first, printed beside), against one forward pass with the KV cache
   measured in this process on the same model (the step Next used to take), and their ratio; and to the whole
   step on screen (the text under the chart shows the step's token: the run that Next starts has drawn it);
   then Back as many times less one, to the chart;
2. open the address -> the first chart drawn, on a warm server (a new session each time; median of 5),
   against a reference opened the same way on its own server in the same run (bench/reference_page.py:
   Streamlit alone, a title and one st.plotly_chart bar chart), and the very first open after the server
   started; each in a new browser profile (nothing cached), and again as a returning visitor (new tabs of
   one profile: Streamlit's scripts come from the browser's cache);
3. --crowd browser sessions open one shared Beam tree link at once: the last session's first chart,
   divided by one session alone opening an equal link (another prompt of the same length, so neither
   is answered from memory before it starts);
4. Play on Step by step: steps drawn per second;
5. --pages: open -> first chart on each named page (default Teacher forcing and Expected embedding), the first
   visitor and the median of --opens later ones, each in a new browser profile: what a page's shared results
   save a second visitor.
Beside each figure: the machine's load (1-minute average) and its number of cores. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import torch

from tests.browser.browser_helpers import (CHROMIUM, CHROMIUM_ARGS, new_context, open_page,
                                           running_server, wait_idle)

CHART = '[class*="st-key-{key}"] .js-plotly-plot'
REFERENCE = Path(__file__).resolve().parent / "reference_page.py"
TITLE = '[class*="st-key-sbs_chart"] .gtitle'


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def say(figure: str) -> None:
    print(f"{figure:<72} [{load()}]", flush=True)


def one_forward_pass(rounds: int = 20) -> float:
    """Median seconds of one decoding step's forward pass (one token, KV cache of the prompt) on the bundled model."""
    from engine import load_model

    lm = load_model()
    ids = torch.tensor([lm.tokenizer("The capital of France is")["input_ids"]])
    times = []
    with torch.inference_mode():
        out = lm.model(input_ids=ids, use_cache=True)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(rounds):
            past = out.past_key_values
            t = time.perf_counter()
            lm.model(input_ids=token, past_key_values=past, use_cache=True)
            times.append(time.perf_counter() - t)
            past.crop(-1)                  # back to the prompt: every round is the same step
    return statistics.median(times)


def step_shown(page) -> int:
    text = page.locator(TITLE).first.text_content() or ""
    return int(text.split(":")[0].split()[-1]) if text.startswith("Step") else 0


def title_shows(page, step: int) -> None:
    """Wait, polling every frame, until Step by step's chart is titled with `step`."""
    page.wait_for_function(f"""() => {{ const t = document.querySelector('{TITLE}');
                               return t && t.textContent.startsWith('Step {step}:'); }}""", polling="raf")


def wait_chart(page, key: str, timeout_ms: int = 600_000) -> None:
    page.locator(CHART.format(key=key)).first.wait_for(state="visible", timeout=timeout_ms)


# In the page, on the page's own clock: when the pointer went down on Next, when the chart's title last changed
# (Plotly has written the new step's SVG; the screen shows it at the next frame), and when the text under the
# chart last changed its number of tokens (the step's run has reached the text: the rest of the step is there).
TEXT_TOKENS = 'span[title^="step "]'
PRESS_AND_TITLE = """
window.__dsNext = {press: 0, title: 0, text: '', tokens: -1, textAt: 0};
document.addEventListener('pointerdown', () => { window.__dsNext.press = performance.now(); }, true);
new MutationObserver(() => {
  const now = performance.now(), t = document.querySelector('%s');
  if (t && t.textContent !== window.__dsNext.text) {
    window.__dsNext.text = t.textContent; window.__dsNext.title = now;
  }
  const n = document.querySelectorAll('%s').length;
  if (n !== window.__dsNext.tokens) { window.__dsNext.tokens = n; window.__dsNext.textAt = now; }
}).observe(document, {subtree: true, childList: true, characterData: true});
""" % (TITLE, TEXT_TOKENS)


def bench_next(browser, server, clicks: int) -> tuple:
    """Next -> the new step drawn, each click: (in the page, from the pointer going down to the chart's new
    title; to the text's new token; from the driver's click call to the chart, which adds Playwright's own
    checks of the button before it presses); then Back as many times, in the page to the chart: (..., back)."""
    ctx = new_context(browser, server)
    ctx.add_init_script(PRESS_AND_TITLE)
    page = ctx.new_page()
    open_page(page, server, "step_by_step", urlencode({"max_new_tokens": clicks + 5, "prompt": "Once upon a time"}))
    wait_chart(page, "sbs_chart")
    chart, whole, driven = [], [], []
    for _ in range(clicks):
        wait_idle(page)
        shown = step_shown(page)
        t = time.perf_counter()
        page.locator(".st-key-sbs_next button").first.click()
        title_shows(page, shown + 1)
        driven.append(time.perf_counter() - t)
        page.wait_for_function(f"window.__dsNext.tokens === {shown + 1}", polling="raf")
        press, title, text = page.evaluate("[window.__dsNext.press, window.__dsNext.title, window.__dsNext.textAt]")
        chart.append((title - press) / 1e3)
        whole.append((max(title, text) - press) / 1e3)
    back = []
    for _ in range(clicks - 1):
        wait_idle(page)
        shown = step_shown(page)
        page.locator(".st-key-sbs_back button").first.click()
        title_shows(page, shown - 1)
        # the chart drawn ahead comes before the answer: without waiting for the answer (the text one token
        # shorter), the next press could reach a server that had not yet taken this one, and Streamlit folds
        # two presses of one button waiting together into one
        page.wait_for_function(f"window.__dsNext.tokens === {shown - 1}", polling="raf")
        press, title = page.evaluate("[window.__dsNext.press, window.__dsNext.title]")
        back.append((title - press) / 1e3)
    ctx.close()
    return chart, whole, driven, back


def bench_open(browser, server, rounds: int = 5) -> list:
    times = []
    for _ in range(rounds):
        ctx = new_context(browser, server)
        page = ctx.new_page()
        t = time.perf_counter()
        page.goto(f"{server.url}/step_by_step", wait_until="commit")
        wait_chart(page, "sbs_chart")
        times.append(time.perf_counter() - t)
        wait_idle(page)
        ctx.close()
    return times


def bench_open_reference(browser, server, rounds: int) -> tuple:
    """Open the reference page (bench/reference_page.py), new profile each time: medians of seconds to its
    title (the least any Streamlit page shows) and to its chart."""
    titles, charts = [], []
    for _ in range(rounds):
        ctx = new_context(browser, server)
        page = ctx.new_page()
        t = time.perf_counter()
        page.goto(server.url, wait_until="commit")
        page.get_by_role("heading", name="Reference").wait_for()
        titles.append(time.perf_counter() - t)
        wait_chart(page, "reference_chart")
        charts.append(time.perf_counter() - t)
        ctx.close()
    return statistics.median(titles), statistics.median(charts)


def bench_open_returning(browser, server, rounds: int = 5) -> list:
    """Open -> first chart in new tabs of one browser profile, after one visit has filled its cache."""
    ctx = new_context(browser, server)
    times = []
    for i in range(rounds + 1):
        page = ctx.new_page()
        t = time.perf_counter()
        page.goto(f"{server.url}/step_by_step", wait_until="commit")
        wait_chart(page, "sbs_chart")
        if i:
            times.append(time.perf_counter() - t)
        wait_idle(page)
        page.close()
    ctx.close()
    return times


def bench_pages(browser, server, names: list, rounds: int) -> None:
    """Open -> first chart on other pages: the first visitor computes the page's results, later ones are
    answered from the server's memory (each in a new profile, so Streamlit's scripts load every time)."""
    for name in names:
        times = []
        for _ in range(rounds + 1):
            ctx = new_context(browser, server)
            page = ctx.new_page()
            t = time.perf_counter()
            page.goto(f"{server.url}/{name}", wait_until="commit")
            page.locator(".js-plotly-plot .main-svg").first.wait_for(state="visible", timeout=600_000)
            times.append(time.perf_counter() - t)
            wait_idle(page)
            ctx.close()
        say(f"{name}: open -> first chart, first visitor {times[0]:.2f} s; later visitors, median of "
            f"{rounds}: {statistics.median(times[1:]):.2f} s")


def crowd_open(browser, server, query: str, n: int) -> float:
    """Seconds from the first of n sessions opening the link to the last of them drawing its tree."""
    contexts = [new_context(browser, server) for _ in range(n)]
    pages = [c.new_page() for c in contexts]
    t = time.perf_counter()
    for page in pages:                                   # every request is on its way before any is awaited
        page.goto(f"{server.url}/beam_tree?{query}", wait_until="commit")
    for page in pages:
        wait_chart(page, "beam_chart")
    seconds = time.perf_counter() - t
    for c in contexts:
        c.close()
    return seconds


def bench_play(browser, server, seconds: float) -> float:
    ctx = new_context(browser, server)
    page = ctx.new_page()
    open_page(page, server, "step_by_step", urlencode({"max_new_tokens": 400, "prompt": "Here is a long story:"}))
    wait_chart(page, "sbs_chart")
    page.locator(".st-key-sbs_play button").first.click()
    page.wait_for_function(f"""() => {{ const m = (document.querySelector('{TITLE}')?.textContent || '')
                                                .match(/^Step (\\d+):/);
                                       return m && Number(m[1]) >= 3; }}""")     # Play may pass Step 3 in a frame
    first, t = step_shown(page), time.perf_counter()
    page.wait_for_timeout(seconds * 1000)
    last, elapsed = step_shown(page), time.perf_counter() - t
    page.locator(".st-key-sbs_play button").first.click()
    ctx.close()
    return (last - first) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clicks", type=int, default=20)
    parser.add_argument("--opens", type=int, default=5, help="warm opens to take the median of")
    parser.add_argument("--crowd", type=int, default=20, help="0 leaves the shared link out")
    parser.add_argument("--play-seconds", type=float, default=8.0, help="0 leaves Play out")
    parser.add_argument("--plain", action="store_true", help="streamlit run app.py: no early model load")
    parser.add_argument("--pages", default="teacher_forcing,expected_embedding",
                        help="other pages to open (comma-separated); empty leaves them out")
    args = parser.parse_args()
    if not Path(CHROMIUM).is_file():
        raise SystemExit(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    forward = one_forward_pass()
    say(f"one forward pass (1 token, KV cache), median of 20: {forward * 1e3:.1f} ms")
    with (tempfile.TemporaryDirectory() as logs, running_server(Path(logs), early_load=not args.plain) as server,
          sync_playwright() as pw):
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        cold = bench_open(browser, server, rounds=1)[0]
        say(f"open -> first chart, first visit after the server started: {cold:.2f} s "
            f"({server.started_for:.1f} s after the server process started, it answered)")
        warm = bench_open(browser, server, rounds=args.opens)
        say(f"open -> first chart, warm server, median of {len(warm)}: {statistics.median(warm):.2f} s "
            f"(min {min(warm):.2f}, max {max(warm):.2f})")
        with running_server(Path(logs), script=REFERENCE) as bare:
            bench_open_reference(browser, bare, rounds=1)      # its first run, not timed
            title, alone = bench_open_reference(browser, bare, rounds=args.opens)
        say(f"  the reference, Streamlit alone (a title and one st.plotly_chart, no model), median of {args.opens}: "
            f"title {title:.2f} s, chart {alone:.2f} s; the app's open = {statistics.median(warm) / alone:.1f} x")
        back = bench_open_returning(browser, server, rounds=args.opens)
        say(f"open -> first chart, warm server, returning visitor, median of {len(back)}: "
            f"{statistics.median(back):.2f} s (min {min(back):.2f}, max {max(back):.2f})")

        nexts, wholes, driven, backs = bench_next(browser, server, args.clicks)
        med = statistics.median(nexts)
        say(f"Next -> new step's chart drawn (pointer down -> chart updated), median of {len(nexts)}: "
            f"{med * 1e3:.0f} ms (min {min(nexts) * 1e3:.0f}, max {max(nexts) * 1e3:.0f}) = {med / forward:.1f} x "
            f"one forward pass")
        whole = statistics.median(wholes)
        say(f"Next -> the whole step on screen (chart and the text's new token), median: {whole * 1e3:.0f} ms "
            f"(min {min(wholes) * 1e3:.0f}, max {max(wholes) * 1e3:.0f}) = {whole / forward:.1f} x one forward pass")
        say(f"  the same clicks timed from the driver's click call to the chart: "
            f"{statistics.median(driven) * 1e3:.0f} ms")
        say(f"Back -> the step before's chart drawn, median of {len(backs)}: {statistics.median(backs) * 1e3:.0f} ms "
            f"(min {min(backs) * 1e3:.0f}, max {max(backs) * 1e3:.0f})")

        if args.crowd > 0:
            bench_crowd(browser, server, args.crowd)
        if args.play_seconds > 0:
            rate = bench_play(browser, server, args.play_seconds)
            say(f"Play on Step by step: {rate:.1f} steps/s")
        if args.pages:
            bench_pages(browser, server, [n for n in args.pages.split(",") if n], args.opens)
        browser.close()


def bench_crowd(browser, server, n: int) -> None:
    common = {"num_beams": 4, "max_new_tokens": 24}
    alone = crowd_open(browser, server, urlencode(dict(common, prompt="A short history of the bicycle:")), 1)
    say(f"Beam tree 4 x 24 link, one session alone -> tree drawn: {alone:.2f} s")
    crowd = crowd_open(browser, server, urlencode(dict(common, prompt="A short history of the sailboat:")), n)
    say(f"{n} sessions open one shared link at once -> last tree drawn: {crowd:.2f} s "
        f"= {crowd / alone:.2f} x one alone")


if __name__ == "__main__":
    main()
