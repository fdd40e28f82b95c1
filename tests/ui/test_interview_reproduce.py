"""The Interview page's follow-up chain on reproducibility, in AppTest: one question at a time, each answer with a
link that opens "Same prompt, another answer" on the settings it promises (the tiny Llama answers every model
load), in English and 中文."""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import ROOT, card_text, open_interview, texts

pytestmark = pytest.mark.usefixtures("navigation_frame")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_chain_asks_one_question_at_a_time_and_links_each_answer_to_its_demo(tiny_loads, lang):
    words = texts("interview_rp", lang)
    at = open_interview(lang)
    assert words["q1"] in card_text(at) and words["a1"] not in card_text(at)
    links = []
    for n in (1, 2, 3, 4):
        at.button(key="iv_rp_reveal").click().run()
        assert words[f"a{n}"] in card_text(at)
        link = [p for p in at.get("page_link") if p.proto.label == words[f"link{n}"]]
        assert len(link) == 1
        links.append(dict(parse_qsl(link[0].proto.query_string)))
        if n < 4:
            at.button(key="iv_rp_next").click().run()
            assert words[f"q{n + 1}"] in card_text(at) and words[f"a{n + 1}"] not in card_text(at)
    at.button(key="iv_rp_restart").click().run()
    assert words["q2"] not in card_text(at)
    # each link opens the page holding the settings it names, and the study it promises ran (in 中文 the first
    # only: the page does not depend on the language)
    for params in links if lang == "en" else links[:1]:
        assert params["lang"] == lang
        page = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
        page.query_params.update(params)
        page.switch_page("pages/reproduce.py").run()
        assert not page.exception, page.exception
        study = page.session_state["rp_study"].settings
        assert ",".join(map(str, study.batch_sizes)) == params["rp_sizes"]
        assert study.dtype == params["rp_dtype"] and study.invariant == (params["rp_invariant"] == "1")
        assert study.verify == int(params["rp_verify"]) and study.max_new_tokens == int(params["max_new_tokens"])
        assert page.title[0].value == texts("rp", lang)["title"]
