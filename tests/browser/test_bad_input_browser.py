"""Bad input in the browser: a clear message on the page, the session keeps working, and
token texts that look like markup (<b>, <br>, <script>, &amp;, $x$) show literally in
every chart label, hover and text view."""
from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from browser_helpers import (act, assert_no_exception, click_key, open_page, screenshot, set_prompt, wait_idle)
from engine import DecodeConfig, Trace
from engine import decode
from figures.labels import visible
from browser_helpers import shown_tokens, upload, wait_chart

pytestmark = pytest.mark.browser

HOSTILE = ["<b>", "<br>", "<script>alert('x')</script>", "&amp;", "$x$", "<img src=x onerror=alert(1)>",
           "</span><i>", "%{x}"]
ERROR = "[data-testid='stAlertContentError']"


def errors(page) -> list:
    return page.locator(ERROR).all_inner_texts()


@pytest.fixture
def watched(page):
    """The page, failing the test if anything on it opens a dialog (an executed alert())."""
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    yield page
    assert not dialogs, f"the page ran script from a token text: {dialogs}"


# ---- prompts -------------------------------------------------------------------------------
def test_empty_and_oversized_prompts_give_a_message_and_the_session_goes_on(watched, server, tmp_path):
    page = watched
    open_page(page, server, "step_by_step", urlencode({"prompt": "The capital of France is", "max_new_tokens": 8}))
    wait_chart(page)
    before = shown_tokens(page)
    assert before

    set_prompt(page, "")
    assert any("empty" in e for e in errors(page)), errors(page)
    assert_no_exception(page, server)
    assert shown_tokens(page) == before, "the decode on screen was lost after an empty prompt"
    screenshot(page, "bad_empty_prompt")

    big = ("A language model predicts the next token. 你好 😀 " * 5000)[:200_000]
    wait_idle(page)
    page.evaluate("""([sel, text]) => {            // a paste: set the whole value at once
        const el = document.querySelector(sel);
        const setter = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set;
        setter.call(el, text); el.dispatchEvent(new Event('input', {bubbles: true}));
    }""", ["[data-testid='stSidebar'] textarea", big])
    act(page, lambda: page.locator("[data-testid='stSidebar'] textarea").first.press("Control+Enter"))
    assert any("context" in e and "shorten" in e for e in errors(page)), errors(page)
    assert_no_exception(page, server)
    assert shown_tokens(page) == before, "the decode on screen was lost after a 200 KB prompt"
    assert len(page.url) < 10_000, f"the 200 KB prompt went into the address ({len(page.url):,} characters)"
    screenshot(page, "bad_200kb_prompt")

    set_prompt(page, "The capital of France is")
    wait_chart(page)
    assert shown_tokens(page) == before
    assert not errors(page)


@pytest.mark.parametrize("prompt", ["北京是中国的首都，", "I love 🍕 and 👩‍👩‍👧", "مرحبا بالعالم שלום",
                                    "<|im_start|>user\nhi<|im_end|>"])
def test_unicode_and_special_token_prompts_decode_in_the_page(watched, server, bundled, prompt):
    page = watched
    open_page(page, server, "step_by_step", urlencode({"prompt": prompt, "strategy": "greedy", "max_new_tokens": 4}))
    wait_chart(page)
    click_key(page, "sbs_next")
    expected = decode(bundled, prompt, DecodeConfig(strategy="greedy", max_new_tokens=2))
    assert [t for _, t in shown_tokens(page)] == [visible(s.chosen_texts[0]) for s in expected.steps]
    assert page.locator("[data-testid='stSidebar'] textarea").first.input_value() == prompt
    assert not errors(page)
    assert_no_exception(page, server)


def test_unknown_model_and_folder_give_a_message_and_the_default_comes_back(watched, server, tmp_path):
    page = watched
    open_page(page, server, "step_by_step", urlencode({"max_new_tokens": 4}))
    wait_chart(page)
    before = shown_tokens(page)
    model = page.locator("[data-testid='stSidebar'] [data-testid='stTextInput'] input").first
    for name, words in (("decodescope-test/no-such-model-anywhere", "no-such-model-anywhere"),
                        (str(tmp_path), "not a model")):
        wait_idle(page)
        model.fill(name)
        act(page, lambda: model.press("Enter"))
        assert any(words in e for e in errors(page)), errors(page)
        assert_no_exception(page, server)
    screenshot(page, "bad_model")
    wait_idle(page)
    model.fill("")
    act(page, lambda: model.press("Enter"))
    wait_chart(page)
    assert shown_tokens(page) == before
    assert not errors(page)


# ---- uploaded traces -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_traces(bundled):
    greedy = decode(bundled, "The capital of France is", DecodeConfig(strategy="greedy", max_new_tokens=5))
    beam = decode(bundled, "The capital of France is", DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=3))
    return greedy, beam


def hostile(trace: Trace) -> Trace:
    """The same trace with every token text replaced by text that looks like markup."""
    data = trace.to_dict()
    n = 0
    for step in data["steps"]:
        for cand in step["candidates"]:
            cand["text"] = HOSTILE[n % len(HOSTILE)] + ("" if n < len(HOSTILE) else str(n))
            n += 1
        by_id = {c["token_id"]: c["text"] for c in step["candidates"]}
        step["chosen_texts"] = [by_id.get(i, HOSTILE[0]) for i in step["chosen_ids"]]
    for k, node in enumerate(data["nodes"]):
        if node["parent"] is not None:
            node["text"] = HOSTILE[k % len(HOSTILE)]
    for seq in data["sequences"]:
        seq["text"] = " ".join(HOSTILE)
    data["prompt"] = "<script>document.title='owned'</script> $x$ &amp; <b>bold</b>"
    return Trace.from_json(json.dumps(data))


def payload(name: str, data: bytes) -> dict:
    return {"name": name, "mimeType": "application/json", "buffer": data}


def test_bad_uploads_give_a_message_and_the_live_decode_stays(watched, server, real_traces, tmp_path):
    page = watched
    greedy, _ = real_traces
    open_page(page, server, "step_by_step", urlencode({"prompt": "The capital of France is", "max_new_tokens": 8}))
    wait_chart(page)
    before = shown_tokens(page)
    newer = greedy.to_dict()
    newer["schema"] = "decodescope.trace/2"
    big = greedy.to_dict()                    # over the uploader's 20 MB (the reader's limit): never sent
    big["prompt"] = "x" * (50 * 1024 * 1024)
    cases = [
        ("not-json.json", b"this is not JSON {", "not valid JSON"),
        ("wrong-shape.json", json.dumps({"hello": [1, 2, 3]}).encode(), "not a DecodeScope trace"),
        ("list.json", b"[1, 2, 3]", "JSON object"),
        ("newer.json", json.dumps(newer).encode(), "newer"),
        ("huge.json", json.dumps(big).encode(), "or smaller"),
    ]
    for name, data, words in cases:
        sent = name != "huge.json"            # the uploader refuses it in the browser: no run follows
        path = tmp_path / name                # a file on disk: Playwright hands over at most 50 MB from memory
        path.write_bytes(data)
        # the message names the file, or the uploader itself says it is too large
        upload(page, "sbs_upload", path, shows=page.locator(ERROR, has_text=name).or_(
            page.locator(".st-key-sbs_upload", has_text=words)), sent=sent)
        said = errors(page) + page.locator(".st-key-sbs_upload").all_inner_texts()   # the uploader's own line
        assert any(words in e for e in said), (name, said)
        assert_no_exception(page, server)
        assert shown_tokens(page) == before, f"the live decode was lost after uploading {name}"
        screenshot(page, f"bad_upload_{name.split('.')[0]}")


def literal_everywhere(page, scope: str = "") -> str:
    """All text the charts and views show under scope (SVG text included), as the user reads it."""
    return page.evaluate("""(scope) => {
        const root = scope ? document.querySelector(scope) : document.body;
        return root ? root.textContent : '';
    }""", scope)


def hover_text(page, point, chart: str, tries: int = 3) -> str:
    """The text of the hover label over `point` in the chart under the selector `chart`. Plotly removes a label
    when the chart is drawn again (a rerun that redraws it after the upload), so hover again while none shows."""
    text = ""
    for _ in range(tries):
        point.hover(force=True)
        page.locator(f"{chart} .hoverlayer .hovertext").first.wait_for(state="attached")
        page.wait_for_timeout(100)
        text = literal_everywhere(page, f"{chart} .hoverlayer")
        if text.strip():
            break
    return text


def test_token_texts_that_look_like_markup_show_literally_in_step_by_step(watched, server, real_traces, tmp_path):
    page = watched
    greedy, _ = real_traces
    bad = hostile(greedy)
    open_page(page, server, "step_by_step")
    upload(page, "sbs_upload", payload("hostile.json", bad.to_json().encode()))
    wait_chart(page)
    for _ in range(len(bad.steps) - 1):
        click_key(page, "sbs_next")
    assert_no_exception(page, server)
    # the text view: every chosen token appears as its literal text, nothing became an element
    texts = [t for _, t in shown_tokens(page)]
    assert texts == [visible(s.chosen_texts[0]) for s in bad.steps]
    assert page.locator("[data-testid='stHtml'] :is(b, i, img)").count() == 0
    # the only scripts are the app's own (presentation helpers), none came from a token
    scripts = page.locator("[data-testid='stHtml'] script").all_text_contents()
    own = ("modebar", "scrollIntoView", "__dsPushState", "MutationObserver(rewrite)")   # present, history, reconnect
    assert all(any(mark in s for mark in own) for s in scripts), scripts
    assert page.locator("[data-testid='stMain'] img[src='x'], [data-testid='stMain'] .katex").count() == 0
    # the chart of the current step: its tick labels and bar texts are the literal token texts
    chart_text = literal_everywhere(page, "[data-testid='stPlotlyChart']")
    last = bad.steps[-1]
    for cand in last.candidates[:8]:
        assert visible(cand.text) in chart_text, (cand.text, chart_text[:500])
    # a hover over a bar shows the literal text too
    bar = page.locator("[data-testid='stPlotlyChart'] .barlayer .point path").first
    hover = hover_text(page, bar, "[data-testid='stPlotlyChart']")
    assert any(visible(c.text) in hover for c in last.candidates), hover
    # the prompt caption shows the markup as text
    main_text = literal_everywhere(page, "[data-testid='stMain']")
    assert "<script>document.title='owned'</script>" in main_text
    assert page.title() != "owned"
    screenshot(page, "hostile_step_by_step")


def test_token_texts_that_look_like_markup_show_literally_in_the_beam_tree(watched, server, real_traces):
    page = watched
    _, beam = real_traces
    bad = hostile(beam)
    open_page(page, server, "beam_tree")
    upload(page, "beam_upload", payload("hostile-beam.json", bad.to_json().encode()))
    wait_chart(page, ".st-key-beam_chart")
    assert_no_exception(page, server)
    chart_text = literal_everywhere(page, ".st-key-beam_chart")
    shown = [h for h in HOSTILE if visible(h) in chart_text]
    assert len(shown) >= 3, chart_text[:800]
    point = page.locator(".st-key-beam_chart .scatterlayer .point").nth(1)
    hover = hover_text(page, point, ".st-key-beam_chart")
    assert any(visible(h) in hover for h in HOSTILE), hover
    assert page.locator("[data-testid='stMain'] img[src='x'], [data-testid='stMain'] .katex").count() == 0
    screenshot(page, "hostile_beam_tree")


def test_token_texts_that_look_like_markup_show_literally_in_compare(watched, server, real_traces):
    page = watched
    greedy, _ = real_traces
    bad = hostile(greedy)
    open_page(page, server, "compare", urlencode({"lanes": "greedy", "max_new_tokens": 5}))
    upload(page, "cmp_upload", payload("hostile.json", bad.to_json().encode()))
    assert_no_exception(page, server)
    lane = page.locator(".st-key-cmp_lane_uploaded")
    lane.wait_for(state="attached")
    texts = [t for _, t in shown_tokens(page, ".st-key-cmp_lane_uploaded")]
    assert texts == [visible(s.chosen_texts[0]) for s in bad.steps]
    # the chart shows token texts only in its hovers: hover each point of the uploaded lane, once the page has
    # stopped running (a chart redrawn under the pointer drops its hover)
    wait_idle(page)
    points = page.locator(".st-key-cmp_chart .scatterlayer .trace").last.locator(".point")
    hovers = []
    for i in range(points.count()):
        hovers.append(hover_text(page, points.nth(i), ".st-key-cmp_chart"))
    assert any(visible(s.chosen_texts[0]) in h for s in bad.steps for h in hovers), hovers
    assert page.locator("[data-testid='stMain'] img[src='x'], [data-testid='stMain'] .katex").count() == 0
    screenshot(page, "hostile_compare")
