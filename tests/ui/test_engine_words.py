"""Every engine message a page shows, in the page's language: under lang=zh each page's error states (an empty
prompt, a model that cannot be loaded, more new tokens than the model's context holds) read in Chinese, with no
run of English words outside code and the user's own text; and a model without a chat template turns the chat
switch off, saying so, instead of refusing the prompt in English."""
from __future__ import annotations

import dataclasses
import re

import pytest

import engine
from engine import Trace
from app_helpers import install_loads, latin_runs, open_app, texts, unescaped
from tiers import spread
from tiny_models import tiny_llama
import ui.shared_model

pytestmark = pytest.mark.usefixtures("navigation_frame")
PAGES = ["step_by_step", "beam_tree", "compare", "expected_embedding", "teacher_forcing", "kv_cache", "structured",
         "speculative", "answers"]
CJK = re.compile(r"[\u4e00-\u9fff]")
BAD_MODEL = "no such model!"       # not a folder, not a hub name: the engine's own loader refuses it


@pytest.fixture
def loads(monkeypatch):
    """The tiny Llama for every model, but BAD_MODEL, which the engine's real loader refuses."""
    lm = tiny_llama()
    install_loads(monkeypatch, lambda name: engine.load_model(name) if name == BAD_MODEL else lm)
    yield lm
    ui.shared_model._models.clear()


def model_texts(at) -> list:
    """What the model wrote: the texts of the decodes the page holds (its token views are left out whole)."""
    found = []
    for name in at.session_state:
        value = at.session_state[name]
        values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        found += [t.best.text for t in values if isinstance(t, Trace)]
    return found


STATES = {"empty prompt": {"prompt": "   "}, "bad model": {"model": BAD_MODEL},
          "over the context": {"max_new_tokens": 300}}       # the tiny Llama reads 256 tokens at once
OWN_LENGTH = ("teacher_forcing", "answers")     # the reference's length, the answers' depth: no such state
CASES = [(p, s) for p in PAGES for s in STATES if not (p in OWN_LENGTH and s == "over the context")]


@pytest.mark.parametrize("page,state", spread(CASES, 9))
def test_each_pages_error_states_read_in_chinese(loads, page, state):
    at = open_app(page, params={"lang": "zh"}, state=STATES[state])
    shown = [unescaped(e.value) for e in at.error] + [unescaped(i.value) for i in at.info]
    assert shown, f"{page}: {state} showed no message"
    assert all(CJK.search(text) for text in shown), shown
    runs = latin_runs(at, [at.session_state["prompt"], BAD_MODEL, *model_texts(at)])
    assert not runs, (page, state, runs)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_model_without_a_chat_template_turns_chat_off_and_says_so(monkeypatch, lang):
    """A base model (Gemma 3 270M has no chat template) chosen with chat on: the page decodes the prompt as
    written, the switch is off and held off, and a caption in the page's language says why."""
    lm = tiny_llama()
    base = dataclasses.replace(lm, facts=dataclasses.replace(lm.facts, has_chat_template=False))
    install_loads(monkeypatch, lambda name: base)
    try:
        at = open_app("step_by_step", params={"lang": lang, "chat": "1"}, state={"model": "gemma3-270m"})
    finally:
        ui.shared_model._models.clear()
    assert not at.error, [e.value for e in at.error]
    toggle = at.sidebar.toggle(key="chat")
    assert toggle.value is False and toggle.disabled
    said = texts("common", lang)["chat_no_template"].split("{model}")[1].strip()
    assert any(said in unescaped(c.value) for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]
    trace = at.session_state["sbs"].trace()
    assert list(trace.prompt_token_ids) == lm.tokenizer(at.session_state["prompt"])["input_ids"]   # not wrapped
    assert at.query_params.get("chat") in (None, "0", "false", "False")
