"""What the first open of Whole answers waits for, on its default settings (the bundled SmolLM2, "The capital of
France is", depth 8, budget 200, 6 children kept, 32 samples, greedy and beam 4).

    .venv/bin/python -m bench.bench_answers_open [--rounds 3] [--opens 3] [--no-browser] [--settle 20]

In this process, on the same model: one forward pass over the prompt; the tree alone (what the page's first chart
waits for now: the page draws it as soon as it is grown); the whole run, tree, greedy and beam 4 and the samples
(what the first chart waited for before, and what the command `python -m engine answers` computes after its
load), each as a ratio to one forward pass. In Chromium (unless --no-browser), on a server started as `make run`
starts it: the address opened, to the tree's chart drawn and to the whole page drawn, for the first visitor and
then in new browser profiles (the run every session shares). The server computes the default run itself once its
model has loaded (ui.serve): a first visitor who comes at once waits for the load and that run, one who comes
`--settle` seconds later finds it finished. Beside each figure: the
machine's load (1-minute average) and its number of cores. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

PROMPT = "The capital of France is"


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores"


def say(figure: str) -> None:
    print(f"{figure:<96} [{load()}]", flush=True)


def in_process(rounds: int) -> None:
    from engine import load_model
    from engine.answers import TreeSettings, grow_tree
    from engine.answers.run import explore
    from engine.tokens import encode_prompt
    from figures.answers import KINDS, icicle

    t = time.perf_counter()
    lm = load_model()
    say(f"the bundled model loaded (from its cache): {time.perf_counter() - t:.2f} s")
    settings = TreeSettings(depth=8, budget=200, branch=6, batch=16)
    ids = encode_prompt(lm, PROMPT, False, settings.depth + 1)
    passes = []
    with torch.inference_mode():
        for _ in range(10):
            t = time.perf_counter()
            lm.model(input_ids=torch.tensor([ids]), use_cache=True)
            passes.append(time.perf_counter() - t)
    one = statistics.median(passes)
    say(f"one forward pass over the prompt ({len(ids)} tokens), median of 10: {one * 1e3:.1f} ms")
    labels = {**{k: k for k in KINDS}, "column": "c", "mass": "m", "nats": "nats", "title": "t", "groups": "{n}"}
    trees, figures, wholes = [], [], []
    for _ in range(rounds):
        t = time.perf_counter()
        tree = grow_tree(lm, ids, settings)
        trees.append(time.perf_counter() - t)
        t = time.perf_counter()
        icicle(tree, labels)
        figures.append(time.perf_counter() - t)
        t = time.perf_counter()
        explore(lm, PROMPT, settings, beams=(1, 4), samples=32, seed=0)
        wholes.append(time.perf_counter() - t)
    tree_s, fig_s, whole_s = (statistics.median(x) for x in (trees, figures, wholes))
    say(f"the tree ({tree.expansions} prefixes), median of {rounds}: {tree_s:.2f} s = {tree_s / one:.0f} passes; "
        f"its figure built in {fig_s * 1e3:.0f} ms")
    say(f"the whole run (tree, greedy, beam 4, 32 samples), median of {rounds}: {whole_s:.2f} s = "
        f"{whole_s / one:.0f} forward passes")
    say(f"the first chart now waits for the tree and its figure: {(tree_s + fig_s) / whole_s:.0%} of the whole run")


def in_browser(opens: int, settle: float = 0.0) -> None:
    from playwright.sync_api import sync_playwright

    from tests.browser.browser_helpers import CHROMIUM, CHROMIUM_ARGS, new_context, running_server, wait_idle

    if not Path(CHROMIUM).is_file():
        raise SystemExit(f"{CHROMIUM} is not installed (apt-get install chromium)")
    tree = ".st-key-wa_tree .main-svg"
    done = ".st-key-wa_download"
    with (tempfile.TemporaryDirectory() as logs, running_server(Path(logs), early_load=True) as server,
          sync_playwright() as pw):
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        if settle:          # as a reader who opens the address a while after `make run` printed it
            say(f"the server answers; the first visitor comes {settle:g} s later")
            time.sleep(settle)
        for i in range(opens + 1):
            ctx = new_context(browser, server)
            page = ctx.new_page()
            t = time.perf_counter()
            page.goto(f"{server.url}/answers?tour=0", wait_until="commit")
            page.locator(tree).first.wait_for(state="visible", timeout=600_000)
            first = time.perf_counter() - t
            page.locator(done).first.wait_for(state="attached", timeout=600_000)
            whole = time.perf_counter() - t
            who = (f"the first visitor, {settle:g} s after the server answered" if i == 0
                   else f"visitor {i + 1} (a new browser profile)")
            say(f"Whole answers opened, {who}: tree drawn {first:.2f} s, whole page {whole:.2f} s")
            wait_idle(page)
            ctx.close()
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds between the server answering and the first visit (default 0: at once)")
    args = parser.parse_args()
    in_process(args.rounds)
    if not args.no_browser:
        in_browser(args.opens, args.settle)


if __name__ == "__main__":
    main()
