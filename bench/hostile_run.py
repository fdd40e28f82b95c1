"""A hostile visitor against one app server: addresses, names, settings, prompts and files meant to
break it, with the server's memory before and after and the time each answer took.

    .venv/bin/python bench/hostile_run.py

It starts `streamlit run app.py` on a free port (offline, the default model cache) and, in
headless Chromium, opens: a page with the bundled model (the baseline), a model name that is
Markdown (a link and an image), a model name that does not exist, strategy settings no control
allows, a 30 KB prompt, 1,500 emoji, a trace file that names a hub model followed by
"Replay with greedy", and Compare with every lane at 1,024 tokens. For each it prints what
the page said (the first error or info line), the seconds to that answer, and whether any
request left for another host. Nothing is asserted: the tests assert the behaviour
(tests/ui/test_links_and_models.py, tests/browser/test_links_browser.py).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlencode

from tests.browser.browser_helpers import (CHROMIUM, CHROMIUM_ARGS, MODEL_TIMEOUT_MS, act, exception_texts,
                                           new_context, open_page, running_server, upload)

MARKDOWN_NAME = "[Click to fix](http://evil) ![x](http://127.0.0.1:8999/p.png)"


def said(page) -> str:
    for selector in ("[data-testid='stAlertContentError']", "[data-testid='stAlertContentInfo']"):
        texts = page.locator(selector).all_inner_texts()
        if texts:
            return texts[0].replace("\u2060", "").replace("\n", " ")[:150]
    return "(no message)"


def hub_trace(path: Path) -> Path:
    """A trace whose model field names a hub id, with a loop so the replay button shows."""
    from tests.engine.test_explain import loop_trace, make_step

    trace = loop_trace()
    trace.steps[3] = make_step(3, [(1, 0.6), (2, 0.3), (3, 0.05), (13, 0.005)], chosen=13)
    data = json.loads(trace.to_json())
    data["model"] = "HuggingFaceTB/SmolLM2-1.7B-Instruct"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def main() -> int:
    import tempfile

    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        memory = {"after start": server.rss_mb()}
        elsewhere = []

        def visit(name: str, page_name: str, query: dict | str, then=None) -> None:
            context = new_context(browser, server)
            page = context.new_page()
            page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(
                (server.url, "data:", "blob:")) else None)
            query = query if isinstance(query, str) else urlencode(query)
            start = time.perf_counter()
            open_page(page, server, page_name, query, timeout_ms=MODEL_TIMEOUT_MS * 3)
            if then is not None:
                then(page)
            seconds = time.perf_counter() - start
            rows.append((name, seconds, said(page), len(page.url.encode()), bool(exception_texts(page))))
            context.close()

        visit("baseline: bundled model, greedy", "step_by_step", {"prompt": "The capital of France is"})
        memory["after the model loaded"] = server.rss_mb()
        visit("Markdown as the model name", "step_by_step", "model=" + quote(MARKDOWN_NAME, safe=""))
        visit("a model that does not exist", "step_by_step", {"model": "no-org/no-such-model"})
        visit("num_beams=-3 top_p=5 tau=-1 temperature=0 top_k=-7 (greedy)", "step_by_step",
              {"strategy": "greedy", "num_beams": -3, "top_p": 5, "tau": -1, "temperature": 0, "top_k": -7})
        visit("a 30 KB prompt", "step_by_step",
              {"prompt": ("A language model predicts the next token from the ones before it. " * 460)[:30_000]})
        visit("1,500 emoji as the prompt (address length after)", "step_by_step", {"prompt": "😀" * 1500})

        def replay(page):
            upload(page, "sbs_upload", str(hub_trace(Path(tmp) / "hub.json")))
            act(page, lambda: page.locator(".st-key-sbs_wh_replay_go button").first.click())

        visit("a trace naming a hub model, then Replay with greedy", "step_by_step", {}, then=replay)
        visit("Compare: every lane, 1,024 tokens", "compare",
              {"lanes": "greedy,beam,top_k,top_p,temperature,soft", "max_new_tokens": 1024})
        memory["after the hostile run"] = server.rss_mb()
        browser.close()

    for name, seconds, message, url_bytes, exception in rows:
        print(f"{name:<62} {seconds:7.1f} s  address {url_bytes:>6,} B  {'EXCEPTION ' if exception else ''}{message}")
    print("requests to other hosts:", elsewhere or "none")
    for when, mb in memory.items():
        print(f"server RSS {when}: {mb:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
