"""The Interview page's cards on whole answers, in AppTest on the tiny Llama: each question first and its answer
on demand, in English and 中文, and each link opening Whole answers (or Beam tree) on the settings it names,
asked in English on the bundled chat model in both languages."""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import ROOT, card_text, open_interview, reveal_cards, texts

pytestmark = [pytest.mark.apptest, pytest.mark.tiny, pytest.mark.usefixtures("navigation_frame")]
CARDS = ("beam", "mode", "length", "entropy")
CAPITAL = "What is the capital of France? Answer in one word."
TITLES = {"answers": "answers", "beam_tree": "beam"}


def reveal_all(at: AppTest, lang: str) -> list:
    """Reveal each card in turn; (page stem, query) of every link its answer shows."""
    return reveal_cards(at, "interview_wa", "wa", CARDS, lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_cards_show_the_question_first_and_the_answer_with_its_demos_on_demand(tiny_loads, lang):
    at = open_interview(lang)
    other = texts("interview_wa", "zh" if lang == "en" else "en")
    assert not any(other[f"{card}_q"] in card_text(at) for card in CARDS)
    links = reveal_all(at, lang)
    assert [page for page, _ in links].count("answers") == 6 and ("beam_tree", links[-2][1]) in links
    for page, params in links:
        assert params["lang"] == lang
        if page == "answers":       # the quoted numbers are the English chat model's, in either language
            assert params["prompt"] in (CAPITAL, "Write a haiku about the sea.", "Is the sky blue? Answer yes or no.")
            assert params["chat"] == "1"
            assert params["model"] == "smollm2-135m"
    at.button(key="iv_wa_reveal_beam").click().run()
    assert texts("interview_wa", lang)["beam_a"] not in card_text(at)


def _opened(page: str, params: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params.update(params)
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, (params, at.exception)
    assert not at.error, (params, [e.value for e in at.error])
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_link_opens_its_page_on_the_settings_it_names(tiny_loads, lang):
    links = reveal_all(open_interview(lang), lang)
    # in 中文 one link of each page: the pages do not depend on the language
    for page, params in links if lang == "en" else [links[0], links[-2]]:
        at = _opened(page, params)
        assert at.title[0].value == texts(TITLES[page], lang)["title"]
        if page == "beam_tree":
            assert at.session_state["num_beams"] == 4 and at.session_state["rerank_lp"] == 0.0
            continue
        state = at.session_state
        assert state["prompt"] == params["prompt"] and state["chat"] is True
        assert (state["wa_depth"], state["wa_budget"], state["wa_branch"]) == (8, 200, 6)
        assert state["wa_dist"] == "model" and state["wa_beams"] == params["wa_beams"].split(",")
        assert at.query_params.get("section") is None          # asked once, dropped once there
        assert at.query_params["wa_beams"] == params["wa_beams"]  # the address the page leaves reproduces the view
        words = texts("answers", lang)
        placed = [m.value for m in at.markdown if any(words["beam_n"].format(n=n) in m.value for n in (2, 4, 8))]
        assert len(placed) == len(params["wa_beams"].split(",")), placed


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_stop_card_opens_gemma_on_a_chinese_prompt_with_its_stop_strings(tiny_loads, lang):
    """The card on where a base model's answers end: its links name Gemma, no chat template, the Chinese prompt and
    the stop strings its numbers were read with; the page they open grows its tree with those stop strings."""
    from ui.interview_answers import CAPITALS_ZH

    at = open_interview(lang)
    words = texts("interview_wa", lang)
    at.button(key="iv_wa_reveal_stop").click().run()
    assert words["stop_a"] in card_text(at)
    found = [p for p in at.get("page_link") if p.proto.label in (words["stop_link1"], words["stop_link2"])]
    links = [dict(parse_qsl(p.proto.query_string)) for p in found]
    assert [(q["model"], q["chat"], q["prompt"], q["wa_stops"]) for q in links] == [
        ("gemma3-270m", "0", CAPITALS_ZH, "newline_cjk_period"), ("gemma3-270m", "0", CAPITALS_ZH, "none")]
    at = _opened("answers", links[0])
    assert at.session_state["prompt"] == CAPITALS_ZH and at.session_state["chat"] is False
    assert at.session_state["wa_run"].tree.settings.stops == ("\n", "。")
