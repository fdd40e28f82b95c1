"""A hostile visitor against one app server: addresses, names, settings, prompts and files meant to
break it, with the server's memory before and after and the time each answer took.

    .venv/bin/python bench/hostile_run.py

It starts `streamlit run app.py` on a free port (offline, the default model cache) and, in headless Chromium,
opens: a page with the bundled model (the baseline), a model name that is Markdown (a link and an image), a
model name that does not exist, strategy settings no control allows, a 30 KB prompt, 1,500 emoji, a trace file
that names a hub model followed by "Replay with greedy", and Compare with every lane at 1,024 tokens. Then
Structured output and Speculative decoding: every hostile constrained trace of tests/hostile_traces.py
uploaded (a billion-token vocabulary with a 125 MB mask, mask bombs, schemas reaching outside), the heaviest
constrained trace the reader accepts (1,024 masks over 2**20 tokens), a catastrophic pattern in an uploaded
trace, hostile schemas in the grammar box (references to a socket this bench listens on, true, false, 200
levels deep), a trace of another kind on each page, and model and draft model names of 256 bytes. Then Whole
answers: saved runs that lie (masses that do not add up, 330,000 nodes, a token text of 1 MB, a budget of
10**12) and a link past every range. For each it prints what the page said (the first error or info line), the
seconds to that answer, the server's peak memory over what it held before the visit, and whether any request
left for another host; then the worst memory and time per family, and the connections the socket saw. Nothing
is asserted: the tests assert the behaviour (tests/ui/test_links_and_models.py,
tests/browser/test_links_browser.py, tests/ui/test_hostile_uploads.py, tests/engine/test_hostile_grammar.py).

    .venv/bin/python bench/hostile_run.py --memory [--gemma] [CASE ...]

runs instead the memory and time family (bench/hostile_memory.py): each worst case a link or a flag can ask for
(Whole answers at its maxima and over long prompts, DRY's breakers at their limits, Step-by-step on step 1,024,
Compare over a long prompt), each in its own interpreter, with its peak memory, the seconds until something is
on screen, and the machine's load beside each figure."""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from tests.browser.browser_helpers import (CHROMIUM, CHROMIUM_ARGS, MODEL_TIMEOUT_MS, act,  # noqa: E402
                                           exception_texts, new_context, open_page, running_server, upload)

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


class Peak:
    """The server's resident memory sampled every 50 ms in a thread while a visit runs; `over_mb` is its peak
    above what it held when the visit began."""

    def __init__(self, server):
        self.server, self.start_mb, self.peak_mb = server, server.rss_mb(), 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self.server.rss_mb())
            self._stop.wait(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self.server.rss_mb())

    @property
    def over_mb(self) -> float:
        return self.peak_mb - self.start_mb


def hostile_files() -> dict:
    """The constrained and beam traces the Structured output and Speculative decoding pages are given, made on
    the tiny random Llama of the tests (reading a file needs no model): {name: bytes}."""
    import hostile_traces
    from tiny_models import tiny_llama

    from engine import DecodeConfig, decode

    lm = tiny_llama()
    constrained = decode(lm, "The capital of France is", DecodeConfig(
        strategy="greedy", max_new_tokens=12, grammar_kind="choices", grammar='["Paris"]'))
    beam = decode(lm, "The capital of France is", DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=4))
    files = {"normal constrained trace": constrained.to_json().encode()}
    files.update({case.name: case.payload for case in hostile_traces.refused_structured(constrained)})
    data = constrained.to_dict()
    data["config"].update(grammar_kind="regex", grammar="(a+)+$")
    data["sequences"][0]["text"] = "a" * 5000 + "b"
    files["catastrophic pattern (a+)+$ over 5,000 a's and a b"] = json.dumps(data).encode()
    files["1,024 steps, masks at the 2**20-token ceiling (read whole)"] = hostile_traces.at_the_ceiling(constrained)
    files["beam trace"] = beam.to_json().encode()
    return files


def answers_files() -> dict:
    """Whole answers runs saved on the tiny Llama, as written and lying: {"answers: name": bytes}."""
    from tiny_models import tiny_llama

    from engine.answers import TreeSettings
    from engine.answers.record import to_json
    from engine.answers.run import explore

    run = explore(tiny_llama(), "The capital of", TreeSettings(depth=3, budget=24, branch=3), samples=8)
    data = json.loads(to_json(run))

    def lying(change) -> bytes:
        copy = json.loads(json.dumps(data))
        change(copy)
        return json.dumps(copy).encode()

    root = data["nodes"][0]
    return {"answers: a saved run": to_json(run).encode(),
            "answers: masses that do not add up": lying(lambda d: d["nodes"][1].__setitem__(6, 0.5)),
            "answers: 330,000 nodes": lying(lambda d: d.__setitem__("nodes", [root] * 330_000)),
            "answers: a token text of 1 MB": lying(lambda d: d["nodes"][1].__setitem__(2, "x" * 1_000_000)),
            "answers: a budget of 10**12": lying(lambda d: d["settings"].__setitem__("budget", 10**12))}


def main() -> int:
    import tempfile

    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        memory = {"after start": server.rss_mb()}
        elsewhere = []

        def visit(name: str, page_name: str, query: dict | str, then=None, family: str = "links and settings"):
            context = new_context(browser, server)
            page = context.new_page()
            page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(
                (server.url, "data:", "blob:")) else None)
            query = query if isinstance(query, str) else urlencode(query)
            with Peak(server) as peak:
                start = time.perf_counter()
                open_page(page, server, page_name, query, timeout_ms=MODEL_TIMEOUT_MS * 3)
                if then is not None:
                    then(page)
                seconds = time.perf_counter() - start
            rows.append((family, name, seconds, said(page), len(page.url.encode()), bool(exception_texts(page)),
                         peak.over_mb))
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
        memory["after the links and settings"] = server.rss_mb()

        # ---- Structured output and Speculative decoding --------------------------------------------------
        import hostile_traces

        structured_live = {"so_kind": "choices", "so_example": "cities", "max_new_tokens": 8,
                           "prompt": "The capital of France is"}
        speculative_live = {"sd_kind": "prompt-lookup", "max_new_tokens": 8, "prompt": "The capital of France is"}
        files = hostile_files()

        def uploading(key: str, name: str):
            def then(page):
                upload(page, key, {"name": f"{name[:40]}.json", "mimeType": "application/json",
                                   "buffer": files[name]})
            return then

        family = "constrained uploads"
        for name in files:
            if name != "beam trace":
                visit(f"Structured output: {name}", "structured", structured_live,
                      then=uploading("so_upload", name), family=family)
        visit("Structured output: a beam trace (another kind)", "structured", structured_live,
              then=uploading("so_upload", "beam trace"), family="another kind")
        visit("Speculative decoding: a beam trace (another kind)", "speculative", speculative_live,
              then=uploading("sd_upload", "beam trace"), family="another kind")
        with hostile_traces.Listener() as listener:
            for name, (schema, _) in hostile_traces.schema_cases(listener.address).items():
                visit(f"Structured output: schema {name} in the box", "structured",
                      dict(structured_live, so_kind="json_schema", so_example="custom",
                           so_grammar=hostile_traces.schema_text(schema)), family="schemas in the box")
        visit("Structured output: regex (a+)+$ in the box", "structured",
              dict(structured_live, so_kind="regex", so_example="custom", so_grammar="(a+)+$"), family="patterns")
        visit("a model name of 256 bytes", "structured", dict(structured_live, model="m" * 256), family="names")
        visit("Speculative decoding: a draft model name of 256 bytes", "speculative",
              dict(speculative_live, sd_kind="model", sd_model="m" * 256), family="names")

        # ---- Whole answers: saved runs that lie, a run's settings past every range -----------------------
        files.update(answers_files())
        answers_live = {"prompt": "The capital of France is", "wa_depth": 4, "wa_budget": 32, "wa_samples": 0}
        for name in [n for n in files if n.startswith("answers:")]:
            visit(f"Whole answers: {name[9:]}", "answers", answers_live, then=uploading("wa_upload", name),
                  family="saved answer runs")
        visit("Whole answers: wa_budget=10**9 wa_depth=-3 wa_branch=nan wa_beams=1,99", "answers",
              dict(answers_live, wa_budget=10**9, wa_depth=-3, wa_branch="nan", wa_beams="1,99"),
              family="links and settings")
        memory["after the hostile run"] = server.rss_mb()
        browser.close()

    for _family, name, seconds, message, url_bytes, exception, over in rows:
        print(f"{name[:62]:<62} {seconds:7.1f} s  +{over:5.0f} MiB  address {url_bytes:>6,} B  "
              f"{'EXCEPTION ' if exception else ''}{message}")
    print()
    print(f"{'family':<24} {'visits':>6} {'worst time':>11} {'worst memory over the visit start':>34}")
    for family in dict.fromkeys(row[0] for row in rows):
        mine = [row for row in rows if row[0] == family]
        print(f"{family:<24} {len(mine):>6} {max(r[2] for r in mine):>9.1f} s {max(r[6] for r in mine):>29.0f} MiB")
    print("requests to other hosts:", elsewhere or "none")
    print("connections to the socket the schemas name:", listener.connections)
    for when, mb in memory.items():
        print(f"server RSS {when}: {mb:,.0f} MiB")
    return 0


if __name__ == "__main__":
    if "--memory" in sys.argv:      # the memory and time a link or a flag can ask for (bench/hostile_memory.py)
        from bench.hostile_memory import main as memory_main

        sys.exit(memory_main([a for a in sys.argv[1:] if a != "--memory"]))
    sys.exit(main())
