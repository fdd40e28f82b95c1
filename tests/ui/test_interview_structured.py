"""The Interview page's follow-up chain on structured output, in AppTest: one question at a time, each answer
with a link that opens the Structured output page on the settings it promises (the tiny Llama answers every
model load), in English and 中文."""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import ROOT, card_text, open_interview, texts

pytestmark = pytest.mark.usefixtures("navigation_frame")



@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_chain_asks_one_question_at_a_time_and_links_each_answer_to_its_demo(tiny_loads, lang):
    words = texts("interview_so", lang)
    at = open_interview(lang)
    assert words["q1"] in card_text(at) and words["a1"] not in card_text(at)
    links = []
    for n in (1, 2, 3):
        at.button(key="iv_so_reveal").click().run()
        assert words[f"a{n}"] in card_text(at)
        link = [p for p in at.get("page_link") if p.proto.label == words[f"link{n}"]]
        assert len(link) == 1
        links.append(dict(parse_qsl(link[0].proto.query_string)))
        if n < 3:
            at.button(key="iv_so_next").click().run()
            assert words[f"q{n + 1}"] in card_text(at) and words[f"a{n + 1}"] not in card_text(at)
    at.button(key="iv_so_restart").click().run()
    assert words["q2"] not in card_text(at)
    # each link opens Structured output holding the settings it names (in 中文 the first one only: the
    # pages do not depend on the language)
    for params in links if lang == "en" else links[:1]:
        assert params["lang"] == lang and params["so_kind"] in ("json_schema", "regex")
        page = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
        page.query_params.update(params)
        page.switch_page("pages/structured.py").run()
        assert not page.exception, page.exception
        for key in ("so_kind", "so_example", "so_strategy"):
            assert page.session_state[key] == params[key]
        config = page.session_state["so_last"].config
        assert config.max_new_tokens == int(params["max_new_tokens"]) and config.grammar == params["so_grammar"]
        assert page.title[0].value == texts("structured", lang)["title"]
