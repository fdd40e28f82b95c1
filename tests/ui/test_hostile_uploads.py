"""Hostile trace files uploaded on every page that opens a trace: Step by step, Beam tree, Compare, Speculative
decoding and Structured output (AppTest, tiny random Llama).

Each refused file (tests/hostile_traces.py) must give one message naming the problem, raise
no exception, and leave the live result on screen as it was. Each whole file that carries
markup (image links to a tracking address, <img>, **bold**, $x$) is shown, and no element
that renders Markdown or HTML holds that markup unescaped; a whole file of another kind (a
beam search on Speculative decoding) gets one line, and the live result stays under it.
Structured output also gets constrained files that claim too much (memory measured per
upload), a catastrophic pattern, and hostile schemas in its box; Speculative decoding a draft
model name longer than a file name.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]

import hostile_traces  # noqa: E402
from app_helpers import figures  # noqa: E402
from tiers import spread  # noqa: E402
from engine import DecodeConfig, Trace, decode  # noqa: E402
from figures.labels import WORD_JOINER  # noqa: E402

PROMPT = "The capital of France is"
UPLOADERS = {"step_by_step": "sbs_upload", "beam_tree": "beam_upload", "compare": "cmp_upload",
             "speculative": "sd_upload", "structured": "so_upload"}
# what a page cannot show, and says so in one line instead: a trace without a beam tree, speculative rounds,
# or grammar masks
SHOWS_ONLY = {"beam_tree": lambda tr: bool(tr.nodes), "speculative": lambda tr: bool(tr.rounds),
              "structured": lambda tr: any(s.grammar is not None for s in tr.steps)}


def page_shows(page: str, trace) -> bool:
    return SHOWS_ONLY.get(page, lambda tr: True)(trace)


def on_screen(at: AppTest) -> tuple:
    """What a user reads as the result: every metric, every coloured token view, how many charts."""
    metrics = [(m.label, m.value) for m in at.metric]
    views = [h.proto.body for h in at.get("html") if "title=" in h.proto.body]
    return metrics, views, len(figures(at))


@pytest.fixture(scope="module")
def cases(tiny_llama_folder):
    lm, _ = tiny_llama_folder
    greedy = decode(lm, PROMPT, DecodeConfig(strategy="greedy", max_new_tokens=6))
    beam = decode(lm, PROMPT, DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=4))
    return hostile_traces.refused(greedy, beam), hostile_traces.accepted(greedy, beam)


# a live result the page finishes without a message of its own: Structured output on a grammar that a few
# tokens complete (four tokens end a JSON object only by chance)
LIVE = {"structured": ({"so_kind": "choices", "so_example": "cities"}, 12)}


def open_page(folder: str, page: str, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    live, new_tokens = LIVE.get(page, ({}, 4))
    for key, value in (params or live).items():
        at.query_params[key] = value
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["max_new_tokens"] = new_tokens
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def upload(at: AppTest, page: str, name: str, payload: bytes) -> None:
    at.file_uploader(key=UPLOADERS[page]).set_value((name, payload, "application/json")).run()


def unescaped_markup(at: AppTest) -> list:
    """Markup from a file that an element would render: Markdown images/links and HTML tags
    left unescaped in Markdown elements, tags in HTML elements and Plotly figures."""
    found = []
    markdown = [*at.markdown, *at.caption, *at.error, *at.info, *at.success, *at.warning]
    for element in markdown:
        bare = re.sub(r"\\.", "", element.value)          # what Markdown shows as literal characters is gone
        if "pixel" in element.value and re.search(r"!\[|\]\(|<img", bare):
            found.append(element.value)
    for element in at.get("html"):
        if "<img" in element.proto.body:
            found.append(element.proto.body[:200])
    for fig in figures(at):
        if "<img" in json.dumps(fig, ensure_ascii=False):
            found.append("plotly: <img")
    return found


@pytest.mark.parametrize("page", spread(UPLOADERS, 1))
def test_refused_files_give_a_message_and_the_live_result_stays(tiny_llama_folder, cases, page):
    _, folder = tiny_llama_folder
    refused, _ = cases
    assert not refusals_gone_wrong(open_page(folder, page), page, refused)


def refusals_gone_wrong(at: AppTest, page: str, refused: list, peaks: dict | None = None) -> list:
    """Upload each refused file in turn on one page session; what went wrong with any (an exception, not exactly
    one message with the case's words, the live result changed, markup rendered). Empty when all went right.
    peaks: when given, filled with each upload's peak of memory held (bytes, tracemalloc: Python and numpy)."""
    before = on_screen(at)
    assert before[2] > 0
    wrong = []
    for case in refused:
        if peaks is None:
            upload(at, page, f"{case.name}.json", case.payload)
        else:
            peaks[case.name] = peak_of(lambda c=case: upload(at, page, f"{c.name}.json", c.payload))
        errors = [e.value.replace("\\", "") for e in at.error]
        if at.exception:
            wrong.append((case.name, "exception", at.exception[0].value))
        elif len(errors) != 1 or not all(words in errors[0] for words in case.words):
            wrong.append((case.name, "message", errors))
        elif on_screen(at) != before:
            wrong.append((case.name, "the live result changed"))
        elif unescaped_markup(at):
            wrong.append((case.name, "markup", unescaped_markup(at)))
    return wrong


def peak_of(run) -> int:
    """The most memory Python and numpy held at once while `run()` ran."""
    import tracemalloc

    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def constrained(tiny_llama_folder):
    """A constrained decode that ends by completing its one choice (the grammar's text is whole)."""
    from engine.grammar.constrain import stop_reason

    trace = decode(tiny_llama_folder[0], PROMPT, DecodeConfig(strategy="greedy", max_new_tokens=12,
                                                               grammar_kind="choices", grammar='["Paris"]'))
    assert stop_reason(trace) == "complete"
    return trace


def test_hostile_constrained_files_on_the_structured_page(tiny_llama_folder, constrained):
    """Each refused file gets the reader's one sentence, the live result stays, and each upload costs less than
    512 MiB over uploading the normal trace (a billion-token claim cost gigabytes)."""
    _, folder = tiny_llama_folder
    at = open_page(folder, "structured")
    normal = peak_of(lambda: upload(at, "structured", "normal.json", constrained.to_json().encode()))
    assert not at.exception and not at.error, [e.value for e in at.error]
    peaks = {}
    at = open_page(folder, "structured")
    assert not refusals_gone_wrong(at, "structured", hostile_traces.refused_structured(constrained), peaks)
    over = {name: round((peak - normal) / 2**20) for name, peak in peaks.items()}
    assert max(over.values()) < 512, over


def test_a_catastrophic_pattern_in_an_uploaded_trace_leaves_the_server_answering(tiny_llama_folder, constrained):
    """A file's regex (a+)+$ and an output of 5,000 a's and a b: Python's re would hold the GIL through 2**5000
    ways; the check answers 'does not match', and another thread ticks meanwhile."""
    import threading
    import time

    _, folder = tiny_llama_folder
    data = constrained.to_dict()
    data["config"].update(grammar_kind="regex", grammar="(a+)+$")
    data["sequences"][0]["text"] = "a" * 5000 + "b"
    at = open_page(folder, "structured")
    ticks, done = [0], threading.Event()

    def tick():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    start = ticks[0]
    upload(at, "structured", "catastrophic.json", json.dumps(data).encode())
    during = ticks[0] - start
    done.set()
    ticker.join()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [texts_en("not_valid", why="the pattern does not match the whole text")]
    assert during >= 1


def texts_en(key: str, **values) -> str:
    from app_helpers import texts

    return texts("structured")[key].format(**values)


# ---- hostile settings: a schema in the box, a draft model's name ------------------------------------------
STRUCTURED_TEXTS = json.loads((Path(__file__).resolve().parents[2] / "assets" / "texts" / "en" / "structured.json")
                              .read_text(encoding="utf-8"))
START_SCHEMA = '{"enum": ["Paris"]}'       # a JSON schema the tiny model completes in a few tokens


def test_hostile_schemas_in_the_box_get_one_line_and_reach_nothing(tiny_llama_folder):
    """References outside the schema (to a listening socket, a file, a relative name), true, false and a schema
    nested 200 deep: each gets its one line, saying what the CLI's says (the engine names its reason, the page
    has words for it), the last result stays, no connection."""
    from engine.grammar.constrain import parse_schema
    from engine.errors import ConfigError

    _, folder = tiny_llama_folder
    at = open_page(folder, "structured", {"so_kind": "json_schema", "so_example": "custom",
                                          "so_grammar": START_SCHEMA})
    last, live = at.session_state["so_last"], on_screen(at)
    wrong = []
    with hostile_traces.Listener() as listener:
        for name, (schema, words) in hostile_traces.schema_cases(listener.address).items():
            text = hostile_traces.schema_text(schema)
            at.text_area(key="so_grammar").input(text).run()
            with pytest.raises(ConfigError) as engine_line:
                parse_schema(text)
            errors = [e.value.replace("\\", "").replace(WORD_JOINER, "") for e in at.error]
            reason = engine_line.value.reason       # the page says it in its words, the CLI in the engine's
            if at.exception or len(errors) != 1 or words not in errors[0] or words not in str(engine_line.value) \
                    or f"error_{reason}" not in STRUCTURED_TEXTS:
                wrong.append((name, errors, at.exception))
            elif at.session_state["so_last"] is not last or on_screen(at) != live:
                wrong.append((name, "the last result changed"))
    assert listener.connections == 0
    assert not wrong, wrong


def test_a_draft_model_name_longer_than_a_file_name_gets_one_line(tiny_llama_folder):
    from engine.config import check_model_name
    from engine.errors import ConfigError

    _, folder = tiny_llama_folder
    at = open_page(folder, "speculative", {"sd_kind": "model", "sd_model": folder})   # the tiny model drafts
    assert at.session_state["sd_trace"].config.draft == f"model:{folder}"
    live = on_screen(at)
    name = "m" * 256
    at.text_input(key="sd_model").input(name).run()
    with pytest.raises(ConfigError) as engine_line:
        check_model_name(name, "draft")
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "").replace(WORD_JOINER, "") for e in at.error]
    assert len(errors) == 1 and str(engine_line.value) in errors[0], errors
    assert on_screen(at) == live


def test_a_model_name_longer_than_a_file_name_gets_one_line(tiny_llama_folder):
    """The CLI's line for --model, inside the page's message; the model used before stays, and so does the result."""
    from engine.config import check_model_name
    from engine.errors import ConfigError

    _, folder = tiny_llama_folder
    at = open_page(folder, "structured")
    live = on_screen(at)
    name = "m" * 256
    at.text_input(key="model").input(name).run()
    with pytest.raises(ConfigError) as engine_line:
        check_model_name(name)
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "").replace(WORD_JOINER, "") for e in at.error]
    assert len(errors) == 1 and str(engine_line.value) in errors[0], errors
    assert on_screen(at) == live


@pytest.mark.parametrize("page", list(UPLOADERS))
def test_text_from_a_whole_file_is_shown_literally(tiny_llama_folder, cases, page):
    _, folder = tiny_llama_folder
    _, accepted = cases
    for case in accepted:
        at = open_page(folder, page)
        live = on_screen(at)
        upload(at, page, f"{case.name}.json", case.payload)
        assert not at.exception, (case.name, at.exception)
        assert not unescaped_markup(at), (case.name, unescaped_markup(at))
        if not page_shows(page, Trace.from_json(case.payload)):
            # a trace this page cannot show (a decode without a tree, rounds or masks): one line naming its
            # strategy, and the live result stays on screen under it
            assert len(at.error) == 1 and ("greedy" in at.error[0].value or "beam" in at.error[0].value), \
                (case.name, [e.value for e in at.error])
            assert on_screen(at) == live, (case.name, "the live result is gone")
            continue
        assert not at.error, (case.name, [e.value for e in at.error])
        # Markdown escapes and the invisible joiner that keeps an address from becoming a link are not text
        shown = [e.value.replace("\\", "").replace(WORD_JOINER, "") for e in (*at.markdown, *at.caption, *at.success)]
        assert any(hostile_traces.MARKUP in value for value in shown), case.name    # the text is there, literally
        if page == "compare":
            continue             # Compare shows the live model's facts beside the uploaded lane
        facts = [m.value for m in at.sidebar.markdown if "pixel\\-name" in m.value]     # the model facts panel
        assert facts and all(value.startswith("**\\!\\[x\\]\\(http") for value in facts), facts


# ---- speculative files: rounds edited by a stranger --------------------------------------------
@pytest.fixture(scope="module")
def spec_run(tiny_llama_folder):
    import torch

    from tiny_models import tiny_gpt2
    from trace_builders import kept_then_rejected_run

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return kept_then_rejected_run(tiny_llama_folder[0], tiny_gpt2(seed=5))
    finally:
        torch.set_num_threads(before)


def with_markup_in_rounds(spec) -> bytes:
    """The whole speculative run with every text a reader sees replaced by markup and tracking pixels."""
    data = spec.to_dict()
    data["prompt"] = data["model"] = hostile_traces.MARKUP
    for step in data["steps"]:
        for cand in step["candidates"]:
            cand["text"] = hostile_traces.MARKUP
        step["chosen_texts"] = [hostile_traces.MARKUP for _ in step["chosen_ids"]]
    for rnd in data["rounds"]:
        rnd["next_text"] = hostile_traces.MARKUP
        for pair in rnd["next_candidates"]:
            pair["text"] = hostile_traces.MARKUP
        for draft in rnd["drafts"]:
            draft["text"] = hostile_traces.MARKUP
            for pair in draft["candidates"]:
                pair["text"] = hostile_traces.MARKUP
            for token in draft["residual"]:
                token["text"] = hostile_traces.MARKUP
    return json.dumps(data).encode()


def test_hostile_rounds_on_the_speculative_page(tiny_llama_folder, spec_run):
    """Each edited round is refused with the reader's one sentence (round and draft named), the live decode
    stays; the whole run with markup in every text opens, and no element renders that markup."""
    _, folder = tiny_llama_folder
    assert not refusals_gone_wrong(open_page(folder, "speculative"), "speculative",
                                   hostile_traces.refused_speculative(spec_run))

    at = open_page(folder, "speculative")
    upload(at, "speculative", "markup-speculative.json", with_markup_in_rounds(spec_run))
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("rounds" in i.value for i in at.info), [i.value for i in at.info]     # viewing the uploaded run
    assert not unescaped_markup(at), unescaped_markup(at)
    # and the texts are there, as text: in the page's words and in its charts' labels
    shown = [e.value.replace("\\", "").replace(WORD_JOINER, "") for e in (*at.markdown, *at.caption, *at.info)]
    drawn = json.dumps(figures(at), ensure_ascii=False)
    assert any(hostile_traces.MARKUP in value for value in shown) or "**bold**" in drawn, (shown, drawn[:300])


# ---- property: damaged real traces on the pages themselves ------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tiers import examples  # noqa: E402

from engine import TraceFormatError  # noqa: E402


@st.composite
def damaged(draw, bases):
    data = draw(st.sampled_from(bases))
    for _ in range(draw(st.integers(1, 2))):
        data = hostile_traces.mutate(data, draw(st.sampled_from(hostile_traces.paths(data))),
                                     draw(st.sampled_from(["delete", "duplicate", "retype", "scale"])),
                                     draw(st.sampled_from(hostile_traces.OTHER_VALUES)),
                                     draw(st.sampled_from(hostile_traces.SCALES)))
    return data


@pytest.mark.parametrize("page", list(UPLOADERS))
def test_damaged_traces_are_refused_with_a_message_or_shown(tiny_llama_folder, page):
    """One page session takes file after file, as a user would; each is refused with one message
    (the live result stays) or shown without an exception."""
    lm, folder = tiny_llama_folder
    bases = [decode(lm, PROMPT, DecodeConfig(strategy="greedy", max_new_tokens=4)).to_dict(),
             decode(lm, PROMPT, DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=3)).to_dict()]
    at = open_page(folder, page)
    live = on_screen(at)

    @settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(data=damaged(bases))
    def check(data):
        payload = json.dumps(data).encode()
        try:
            trace = Trace.from_json(payload)
        except TraceFormatError:
            trace = None
        upload(at, page, "damaged.json", payload)
        assert not at.exception, [e.value for e in at.exception]
        errors = [e.value for e in at.error]
        if trace is None:
            assert len(errors) == 1 and "trace" in errors[0], errors
            assert on_screen(at) == live
        elif not page_shows(page, trace):
            assert len(errors) == 1, errors        # "this trace has no beam tree" (rounds, grammar masks)
        else:
            assert not errors, errors
        assert not unescaped_markup(at)

    check()


@pytest.mark.parametrize("whole", [True, False])
def test_an_upload_is_read_and_checked_once_however_often_the_page_reruns(tiny_llama_folder, cases, monkeypatch,
                                                                        whole):
    """Every click reruns the page; a 20 MB file checked again at each one made every click wait. Reference:
    the number of times the reader is called."""
    from engine import Trace

    _, folder = tiny_llama_folder
    refused, accepted = cases
    payload = accepted[0].payload if whole else refused[0].payload
    reads = []
    real = Trace.from_json.__func__
    monkeypatch.setattr(Trace, "from_json", classmethod(lambda cls, text: reads.append(1) or real(cls, text)))
    at = open_page(folder, "step_by_step")
    upload(at, "step_by_step", "kept.json", payload)
    for _ in range(3):
        at.run()
    assert not at.exception, at.exception
    assert len(reads) == 1
    assert bool(at.error) is not whole
    upload(at, "step_by_step", "other.json", accepted[1].payload)      # another file is read, once
    at.run()
    assert len(reads) == 2
