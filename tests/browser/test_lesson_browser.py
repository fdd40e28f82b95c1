"""A lesson file opened from disk in Chromium, with every request that is not the file itself blocked and
counted: no request, no console error, no CSP violation; each step's chart holds the trace's own numbers
(read back from the plot and compared), by the keys and by the buttons; the language switch changes every
string; the phone viewport does not scroll sideways and its controls are big enough to tap; the beam tree grows
step by step. Screenshots of each kind at 1280×720 and 390×844 go to artifacts/screenshots/."""
from __future__ import annotations

import html
import json
import re

import pytest

from browser_helpers import SCREENSHOTS
from engine import DecodeConfig, Trace, decode
from engine.lesson import lesson_html
from figures.beam_tree import short_label
from figures.labels import visible
from tiny_models import ROOT

HOSTILE = "</script><img src=x onerror=alert(1)>"
WIDE, PHONE = {"width": 1280, "height": 720}, {"width": 390, "height": 844}
WATCH = """() => { window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', e => window.cspViolations.push(e.violatedDirective)); }"""


@pytest.fixture(scope="module")
def lessons(llama, tmp_path_factory):
    """A sampled run with top-p (a hostile prompt, and one candidate's text made hostile) and a beam search,
    each written as a lesson file."""
    folder = tmp_path_factory.mktemp("lessons")
    sample = decode(llama, HOSTILE + " Once upon", DecodeConfig(strategy="sample", temperature=0.8, top_p=0.9,
                                                                max_new_tokens=5, top_n=8, seed=3))
    data = sample.to_dict()
    data["steps"][1]["candidates"][1]["text"] = HOSTILE
    sample = Trace.from_dict(data)
    beam = decode(llama, "The capital of France is", DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=4))
    structured = decode(llama, "The code:", DecodeConfig(strategy="greedy", max_new_tokens=12, grammar_kind="regex",
                                                         grammar=r"[0-9]{2}-[a-z]{2,3}"))
    for seed in range(5, 45):       # a run with a rejected draft (seed 5 here), so a round ends in a correction
        speculative = decode(llama, "Once upon a time", DecodeConfig(
            strategy="speculative", draft="early-exit:1", draft_tokens=3, verify="sample", temperature=1.5,
            max_new_tokens=10, seed=seed))
        if any(r.next_kind == "corrected" for r in speculative.rounds):
            break
    files = {}
    for name, trace in (("sample", sample), ("beam", beam), ("structured", structured),
                        ("speculative", speculative)):
        files[name] = folder / f"{name}.html"
        files[name].write_text(lesson_html(trace, notes={"2": "a note <b>as written</b>"}), encoding="utf-8")
    return {"sample": (sample, files["sample"]), "beam": (beam, files["beam"]),
            "structured": (structured, files["structured"]), "speculative": (speculative, files["speculative"])}


class Opened:
    """A lesson file in its own context: requests other than the file counted and refused, console errors and
    dialogs (an alert() would mean text became markup) recorded."""

    def __init__(self, browser, path, viewport):
        self.requests, self.errors, self.dialogs = [], [], []
        self.context = browser.new_context(viewport=viewport)
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.add_init_script(f"({WATCH})()")
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.as_uri())
        self.page.wait_for_function("() => window.lessonFirstChart > 0")

    def _route(self, route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            self.requests.append(route.request.url)
            route.abort()

    def chart(self) -> dict:
        return self.page.evaluate("""() => { const gd = document.getElementById('chart');
            return {data: gd.data.map(t => ({x: t.x, y: t.y, name: t.name, line: t.marker && t.marker.line})),
                    ticks: gd.layout.yaxis.ticktext, title: gd.layout.title.text}; }""")

    def where(self) -> str:
        return self.page.text_content("#where")

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"lesson-{name}.png"))

    def close(self) -> None:
        assert self.requests == [] and self.errors == [] and self.dialogs == []
        assert self.page.evaluate("window.cspViolations") == []
        self.context.close()


def expected_step(trace, s: int) -> tuple:
    """(raw p, shaped p, tick texts, the chosen one's position) of step s, from the trace's own records."""
    cands = sorted(trace.steps[s].candidates, key=lambda c: c.rank)
    chosen_id = trace.steps[s].chosen_ids[0]
    if len(cands) > 20 and chosen_id not in [c.token_id for c in cands[:20]]:
        cands = cands[:19] + [c for c in cands if c.token_id == chosen_id]      # the chosen one stays in view
    ticks = [f"{c.rank}. {html.escape(short_label(visible(c.text), 20), quote=False)}" for c in cands]
    chosen = [c.token_id for c in cands].index(chosen_id)
    return [c.prob for c in cands], [c.shaped_prob for c in cands], ticks, chosen


def check_step(lesson: Opened, trace, s: int) -> None:
    raw, shaped, ticks, chosen = expected_step(trace, s)
    shown = lesson.chart()
    assert lesson.where() == f"Step {s + 1} of {len(trace.steps)}"
    assert shown["data"][0]["x"] == pytest.approx(raw, rel=1e-4, abs=1e-9)
    assert shown["data"][1]["x"] == pytest.approx(shaped, rel=1e-4, abs=1e-9)
    assert shown["ticks"] == ticks
    widths = shown["data"][0]["line"]["width"]
    assert [i for i, w in enumerate(widths) if w > 0] == [chosen]
    facts = lesson.page.text_content("#facts")
    names = {"temperature": "temperature", "top_k": "top-k", "top_p": "top-p", "min_p": "min-p",
             "repetition_penalty": "repetition penalty"}
    for stage in trace.steps[s].stages:           # each sampler stage: its setting and the tokens it kept
        if stage.name in names:
            assert f"{names[stage.name]} {stage.value:g}: {stage.kept_count:,} tokens kept" in facts
    marked = lesson.page.text_content("#text mark")
    assert marked == trace.steps[s].chosen_texts[0]


# boxes on the chart, in page pixels: Plotly's annotations, the cumulative curve's points, the axes' texts
BOXES = """() => { const box = e => { const r = e.getBoundingClientRect();
                                    return {l: r.left, r: r.right, t: r.top, b: r.bottom, text: e.textContent}; };
    const all = q => [...document.querySelectorAll('#chart ' + q)].map(box);
    return {notes: all('.annotation-text'), points: all('.scatterlayer path.point'), xticks: all('.xtick text'),
            yticks: all('.ytick text'), xtitle: all('.g-xtitle text'), x2title: all('.g-x2title text')}; }"""


def overlapping(a: dict, others: list) -> list:
    return [o for o in others if a["l"] < o["r"] and o["l"] < a["r"] and a["t"] < o["b"] and o["t"] < a["b"]]


def check_readable(lesson: Opened) -> dict:
    """Nothing written over what the chart shows: '◀ chosen' on no point of the cumulative curve, the top-p label on
    no candidate's name, the axis title on no tick. Returns the boxes."""
    boxes = lesson.page.evaluate(BOXES)
    chosen = [n for n in boxes["notes"] if "chosen" in n["text"] or "选中" in n["text"]]
    assert len(chosen) == 1 and overlapping(chosen[0], boxes["points"]) == [], chosen
    for note in boxes["notes"]:
        assert overlapping(note, boxes["yticks"]) == [], note
    assert overlapping(boxes["xtitle"][0], boxes["xticks"]) == [], boxes["xtitle"]
    return boxes


CAVEAT = {"en": "top-p = 0.9 · it cuts the temperature-scaled curve, not this raw one",
          "zh": "top-p = 0.9 · 截断的是温度缩放后的曲线，而非这条原始曲线"}
CUMULATIVE_AXIS = {"en": "cumulative raw probability", "zh": "原始概率累计"}


def page_text(lesson: Opened) -> str:
    return lesson.page.evaluate("() => document.body.innerText + ' ' + "
                                "[...document.querySelectorAll('#chart text')].map(t => t.textContent).join(' ')")


def test_a_sampled_run_steps_by_keys_and_buttons_with_the_traces_numbers(browser, lessons):
    trace, path = lessons["sample"]
    n = len(trace.steps)
    lesson = Opened(browser, path, WIDE)
    page = lesson.page
    assert page.text_content("#prompt") == trace.prompt                  # the hostile prompt, as written
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    check_step(lesson, trace, 0)
    lesson.shot("sample-1280x720")
    for s in range(1, n):                                                 # every step by the arrow key
        page.keyboard.press("ArrowRight")
        check_step(lesson, trace, s)
    page.keyboard.press("ArrowRight")                                     # past the end: stays on the last
    check_step(lesson, trace, n - 1)
    page.click("#back")
    page.click("#back")
    check_step(lesson, trace, n - 3)
    page.click("#next")
    check_step(lesson, trace, n - 2)
    page.keyboard.press("ArrowLeft")
    check_step(lesson, trace, n - 3)
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    check_step(lesson, trace, 1)
    assert HOSTILE in page.text_content("#facts") or HOSTILE not in trace.steps[1].chosen_texts
    assert page.text_content("#note") == "a note <b>as written</b>"      # step 2's note, as text
    assert "top-p = 0.9" in page_text(lesson)                             # the threshold drawn for top-p
    # as the app draws it: at temperature 0.8 top-p cuts the scaled curve, not the raw one drawn; the cumulative
    # curve on its own titled axis, not a second unnamed 0-1 scale over the probabilities
    boxes = check_readable(lesson)
    assert CAVEAT["en"] in [n["text"] for n in boxes["notes"]]
    assert [t["text"] for t in boxes["x2title"]] == [CUMULATIVE_AXIS["en"]]
    assert page.is_hidden("#chart-note")
    page.keyboard.press("End")
    page.keyboard.press("ArrowLeft")
    page.click("#play")                                                   # Play runs to the end and stops
    page.wait_for_function(f"() => document.getElementById('slider').value === '{n}'")
    check_step(lesson, trace, n - 1)
    page.wait_for_function("() => document.getElementById('play').textContent === '▶ Play'")
    # the figure whole on the first screen
    box = page.locator("#chart").bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= WIDE["height"] and box["x"] + box["width"] <= WIDE["width"]
    # the language switch changes every string the page shows
    en, zh = (json.loads((ROOT / "assets" / "texts" / lang / "lesson.json").read_text(encoding="utf-8"))
              for lang in ("en", "zh"))
    fragments = {key: max(re.split(r"\{\w+\}", text), key=len).strip() for key, text in en.items()
                 if text != zh[key]}
    before = page_text(lesson)
    shown = {key for key, words in fragments.items() if len(words) >= 4 and words in before}
    assert {"back", "next", "play", "prompt", "step_of", "raw", "shaped", "footer", "chart_title"} <= shown
    page.click("button[data-lang=zh]")
    after = page_text(lesson)
    assert [key for key in shown if fragments[key] in after] == []
    assert lesson.where() == f"第 {n} 步，共 {n} 步" and page.evaluate("document.documentElement.lang") == "zh-CN"
    boxes = check_readable(lesson)
    assert CAVEAT["zh"] in [n["text"] for n in boxes["notes"]]
    assert [t["text"] for t in boxes["x2title"]] == [CUMULATIVE_AXIS["zh"]]
    assert page.text_content("#subtitle").endswith("采样, 温度 0.8, top-p 0.9")       # the strategy in Chinese
    lesson.shot("sample-1280x720-zh")
    lesson.close()


def test_on_a_phone_nothing_scrolls_sideways_and_every_control_is_tappable(browser, lessons):
    for kind in ("sample", "beam", "structured", "speculative"):
        trace, path = lessons[kind]
        lesson = Opened(browser, path, PHONE)
        page = lesson.page
        page.click("#next")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        sizes = page.evaluate("""() => [...document.querySelectorAll('button, input')].map(e => {
            const r = e.getBoundingClientRect(); return [e.id || e.textContent, r.width, r.height]; })""")
        assert [s for s in sizes if s[1] < 44 or s[2] < 44] == []
        if kind == "sample":          # every step readable; the caveat under the chart, not over the names
            for s in range(len(trace.steps)):
                page.keyboard.press("Home" if s == 0 else "ArrowRight")
                check_readable(lesson)
            assert page.text_content("#chart-note") == CAVEAT["en"] and page.is_visible("#chart-note")
        if kind == "beam":            # the best path's tokens named on the tree
            names = page.evaluate("[...document.querySelectorAll('#chart .scatterlayer text')].map(t => t.textContent)")
            best = trace.path(trace.steps[1].beam_node_ids[0])
            assert short_label(visible(best[-1].text), 6) in names, names
        lesson.shot(f"{kind}-390x844")
        lesson.close()


def test_a_beam_search_grows_its_tree_step_by_step(browser, lessons):
    trace, path = lessons["beam"]
    lesson = Opened(browser, path, WIDE)
    page = lesson.page
    for s in range(len(trace.steps)):
        if s:
            page.click("#next")
        shown = lesson.chart()
        drawn = {d["name"]: len(d["x"]) for d in shown["data"] if d["name"] in ("kept", "pruned", "finished")}
        upto = [n for n in trace.nodes if 0 <= n.step <= s]
        statuses = ("kept", "pruned", "finished")
        assert drawn == {status: sum(1 for n in upto if n.status == status) for status in statuses}
        running = trace.path(trace.steps[s].beam_node_ids[0]) if s < len(trace.steps) - 1 else trace.path(
            trace.best.node_id)
        assert page.text_content("#text") == "".join(n.text for n in running)
    lesson.shot("beam-1280x720")
    lesson.close()


def strip(lesson: Opened) -> dict:
    return lesson.page.evaluate("""() => Object.fromEntries(document.getElementById('strip').data
                                           .map(t => [t.name, [t.x, t.y]]))""")


def test_the_strip_shows_z_per_step_and_where_each_speculative_token_came_from(browser, lessons):
    trace, path = lessons["structured"]
    lesson = Opened(browser, path, WIDE)
    shown = strip(lesson)
    forced = [(i + 1, s.grammar.feasible_mass) for i, s in enumerate(trace.steps) if s.grammar.forced]
    free = [(i + 1, s.grammar.feasible_mass) for i, s in enumerate(trace.steps) if not s.grammar.forced]
    for name, expected in (("forced", forced), ("chosen by the model", free)):
        assert shown[name][0] == [x for x, _ in expected]
        assert shown[name][1] == pytest.approx([z for _, z in expected], rel=1e-4)
    check_step(lesson, trace, 0)
    lesson.shot("structured-1280x720")
    lesson.close()

    trace, path = lessons["speculative"]
    kinds = {}                        # step (from 1) -> where its token came from, read off the rounds
    for r in trace.rounds:
        step = r.first_step + 1
        for d in r.drafts:
            if d.status == "kept":
                kinds[step] = "kept draft"
                step += 1
        if r.next_id is not None:
            kinds[step] = r.next_kind
    lesson = Opened(browser, path, WIDE)
    shown = strip(lesson)
    for name in ("kept draft", "corrected", "bonus"):
        assert shown[name][0] == [s for s, kind in sorted(kinds.items()) if kind == name]
    assert "corrected" in kinds.values()
    for s in range(len(trace.steps)):
        if s:
            lesson.page.keyboard.press("ArrowRight")
        check_step(lesson, trace, s)
    lesson.shot("speculative-1280x720")
    lesson.close()


def test_a_stage_that_keeps_one_token_says_token(browser, llama, tmp_path):
    """Top-k 1 keeps one token: the stage line reads '1 token kept' in English, not '1 tokens kept'."""
    trace = decode(llama, "Once upon", DecodeConfig(strategy="sample", top_k=1, max_new_tokens=2, seed=1))
    path = tmp_path / "top-k-1.html"
    path.write_text(lesson_html(trace), encoding="utf-8")
    lesson = Opened(browser, path, WIDE)
    facts = lesson.page.text_content("#facts")
    assert "top-k 1: 1 token kept" in facts and "1 tokens" not in facts, facts
    lesson.close()
