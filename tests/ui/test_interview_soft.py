"""The Interview page's cards on feeding back more than an id, in AppTest on the tiny Llama: each question first,
its answer on demand, in English and 中文, and each link opening Expected embedding's feed-back lanes on the
settings it names."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import ROOT, card_text, open_interview, reveal_cards, texts

pytestmark = pytest.mark.usefixtures("navigation_frame")
CARDS = ("contradict", "paths", "coconut", "cost", "moi", "greedy")


def reveal_all(at: AppTest, lang: str) -> list[dict]:
    """Reveal each card in turn; the query of every link its answer shows (each opens Expected embedding)."""
    links = reveal_cards(at, "interview_si", "si", CARDS, lang)
    assert all(page == "expected_embedding" for page, _ in links)
    return [query for _, query in links]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_six_cards_show_the_question_first_and_the_answer_with_its_demos_on_demand(tiny_loads, lang):
    at = open_interview(lang)
    other = texts("interview_si", "zh" if lang == "en" else "en")
    assert not any(other[f"{card}_q"] in card_text(at) for card in CARDS)
    links = reveal_all(at, lang)
    assert len(links) == 8
    assert all(params["lang"] == lang and params["section"] == "soft-inputs" for params in links)
    at.button(key="iv_si_reveal_cost").click().run()
    assert texts("interview_si", lang)["cost_a"] not in card_text(at)


def test_each_link_opens_the_lanes_it_names(tiny_loads):
    for params in reveal_all(open_interview("en"), "en"):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
        at.query_params.update(params)
        at.switch_page("pages/expected_embedding.py").run()
        assert not at.exception, (params, at.exception)
        assert not at.error, (params, [e.value for e in at.error])
        state = at.session_state
        assert state["si_lanes"] == params["si_lanes"].split(",")
        for key, kind in (("si_beta", str), ("si_gumbel", float), ("si_probe", lambda v: v == "1"),
                          ("si_k", int), ("si_cold_tau", float)):
            if key in params:
                assert state[key] == kind(params[key]), key
        assert at.query_params["si_lanes"] == params["si_lanes"]      # the address left reproduces the view
        probed = any("JS vs top-1 id" in df.value.columns for df in at.dataframe)
        assert probed == (params.get("si_probe") == "1"), params
