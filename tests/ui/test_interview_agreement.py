"""The Interview page's cards on choosing by agreement, in AppTest on the tiny Llama: each question first and
its answer on demand, in English and 中文, and each link opening Whole answers at its agreement section on the
settings it names (the utility, the samples, the question asked in English on the bundled chat model)."""
from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import ROOT, card_text, open_interview, reveal_cards, texts
from ui.interview_agreement import CARDS

pytestmark = [pytest.mark.apptest, pytest.mark.tiny, pytest.mark.usefixtures("navigation_frame")]


def reveal_all(at: AppTest, lang: str) -> list:
    """Reveal each card in turn; (page stem, query) of every link its answer shows."""
    return reveal_cards(at, "interview_agree", "ag", CARDS, lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_cards_show_the_question_first_and_link_to_the_agreement_section(tiny_loads, lang):
    at = open_interview(lang)
    other = texts("interview_agree", "zh" if lang == "en" else "en")
    assert not any(other[f"{card}_q"] in card_text(at) for card in CARDS)
    links = reveal_all(at, lang)
    assert len(links) == 5 and all(page == "answers" for page, _ in links)
    for _, params in links:
        assert params["lang"] == lang and params["section"] == "agreement" and params["chat"] == "1"
        assert params["wa_mbr"] in ("exact", "text", "chrf") and params["model"] == "smollm2-135m"


def test_a_link_opens_whole_answers_on_its_agreement_settings(tiny_loads):
    links = reveal_all(open_interview("en"), "en")
    _, params = links[0]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params.update(params)
    at.switch_page("pages/answers.py").run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    state = at.session_state
    assert state["prompt"] == params["prompt"] and state["wa_mbr"] == "chrf" and state["wa_samples"] == 64
    assert state["wa_mbr_k"] == 16 and at.query_params["wa_mbr"] == "chrf"
    assert texts("agreement")["header"] in [h.value for h in at.subheader]
