"""Bad input on every page: a clear message, and the results already on screen stay (and Play).

Each page is opened on the tiny random Llama (saved to a folder and typed into the model
box) with a good prompt. Then the prompt is made empty, then longer than the model's
context: the page must name what is wrong, raise no exception, and still show the same
numbers and charts as before. Fixing the prompt brings the page back without a message.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import on_screen

ROOT = Path(__file__).resolve().parents[2]

PROMPT = "The capital of France is"
PAGES = ["step_by_step", "beam_tree", "compare", "expected_embedding", "teacher_forcing", "kv_cache"]


def set_prompt(at: AppTest, text: str) -> None:
    at.sidebar.text_area(key="prompt").set_value(text).run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("page", PAGES)
def test_a_bad_prompt_names_the_problem_and_keeps_the_result(tiny_llama_folder, page):
    lm, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["max_new_tokens"] = 4
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    before = on_screen(at)
    assert before[2] > 0, "the page drew no chart for a good prompt"

    context = lm.model.config.max_position_embeddings
    for bad, words in (("", "prompt: is empty"), ("word " * (context + 10), "longer than the model's context")):
        set_prompt(at, bad)
        messages = [e.value.replace("\\", "") for e in at.error]      # as read: Markdown escapes are not text
        assert any(words in m for m in messages), (page, messages)
        assert len(messages) == len(set(messages)), f"a message was repeated: {messages}"
        assert on_screen(at) == before, f"{page}: the result on screen changed after a bad prompt"
        assert any("last ones that worked" in c.value for c in at.caption), page

    set_prompt(at, PROMPT)
    assert not at.error, [e.value for e in at.error]
    assert on_screen(at) == before


def test_play_steps_to_the_end_then_stops(tiny_llama_folder):
    """Play decodes one token per tick of its timer until the decode is finished, then turns itself off.
    AppTest runs no timers: each tick is one run here."""
    lm, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["max_new_tokens"] = 4
    at.switch_page("pages/step_by_step.py")
    at.run()
    assert len(token_spans(at)) == 1
    at.button(key="sbs_play").click().run()
    for _ in range(10):
        if not at.session_state["sbs_playing"]:
            break
        at.run()
    assert not at.exception, at.exception
    assert at.session_state["sbs_playing"] is False
    # the greedy tokens of a plain forward loop, stopping at EOS like the page
    import torch

    ids = lm.tokenizer(PROMPT)["input_ids"]
    out = []
    with torch.no_grad():
        for _ in range(4):
            out.append(int(lm.model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax()))
            if out[-1] == lm.model.generation_config.eos_token_id:
                break
    assert len(out) > 1, "the tiny model ends at once: nothing to play"
    assert len(token_spans(at)) == len(out)
    assert at.button(key="sbs_play").label == "Play"


def token_spans(at: AppTest) -> list:
    """The coloured tokens of the text view (one span with a 'step N:' hover each)."""
    import re

    views = [h.proto.body for h in at.get("html") if "title=\"step " in h.proto.body]
    return re.findall(r'title="step (\d+):', views[0]) if views else []
