"""The interview page in AppTest: both languages, every demo link, the practice cards, the timer.

The links open their pages on the bundled model.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from app_helpers import INTERVIEW, page_links

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")

pytestmark = [pytest.mark.bundled, pytest.mark.usefixtures("navigation_frame")]


def texts(lang: str, section: str = "interview") -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


EN, ZH = texts("en"), texts("zh")


def open_interview(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=900)
    at.query_params.update(query)
    at.switch_page(INTERVIEW).run()
    assert not at.exception, at.exception
    return at


def strings(node) -> list[str]:
    """Every text shown in a part of the page: values, labels, tab labels, page-link labels."""
    out = []
    for attr in ("value", "label", "body"):
        value = getattr(node, attr, None)
        if isinstance(value, str) and value:
            out.append(value)
    proto = getattr(node, "proto", None)
    for field in ("label", "body"):
        value = getattr(proto, field, None) if proto is not None else None
        if isinstance(value, str) and value:
            out.append(value)
    for child in getattr(node, "children", {}).values():
        out.extend(strings(child))
    return out


def shown(at: AppTest) -> str:
    return "\n".join(strings(at.main) + strings(at.sidebar))


# ---- English and 中文 ------------------------------------------------------------------------
SAMPLE_KEYS = ("title", "question", "short_heading", "tab_answer", "tab_cards", "tab_spoken", "tab_papers",
               "part_logits_title", "part_kv_body", "cards_intro", "scenario_q", "reveal", "spoken_intro",
               "remember", "cue_1", "paper_jang_why", "link_greedy")


def test_switching_language_changes_the_page_text():
    at = open_interview()
    english = shown(at)
    for key in SAMPLE_KEYS:
        assert EN[key] in english, key
    at.sidebar.selectbox(key="lang").select("zh").run()
    assert not at.exception
    chinese = shown(at)
    for key in SAMPLE_KEYS:
        assert ZH[key] in chinese, key
        assert EN[key] not in chinese, key
    assert at.query_params["lang"] == "zh"
    # the sidebar and the page titles follow too
    assert "zh" == at.sidebar.selectbox(key="lang").value
    assert texts("zh", "present")["toggle"] == at.sidebar.toggle(key="present").label


def test_the_language_in_the_url_opens_the_page_in_chinese():
    at = open_interview(lang="zh")
    assert at.title[0].value == ZH["title"]
    assert all(params.get("lang") == "zh" for _, params in page_links(at))


# ---- every link opens its page with the settings it promised --------------------------------
SECTION_OF_PAGE = {"beam_tree": "beam", "compare": "compare", "expected_embedding": "embedding",
                   "teacher_forcing": "teacher", "kv_cache": "kv", "interview": "interview"}


def _same(expected: str, actual) -> bool:
    if isinstance(actual, bool):
        return actual == (expected in ("1", "true", "True"))
    try:
        return float(expected) == float(actual)
    except (TypeError, ValueError):
        return str(actual) == expected


def test_every_link_opens_a_page_that_renders_with_the_promised_settings():
    links = page_links(open_interview())
    pages = {page for page, _ in links}
    assert {"step_by_step", "kv_cache", "beam_tree", "expected_embedding", "teacher_forcing", "compare"} <= pages
    for page, params in links:
        assert params.get("prompt") and params.get("lang") == "en", (page, params)
        # A fresh session opened on the link's address. (Inside one session AppTest keeps the
        # sidebar widgets of the previous page, which a browser drops on a page switch; the
        # browser test follows a link inside a session.)
        at = AppTest.from_file(APP, default_timeout=900)
        at.query_params.update(params)
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, params, at.exception)
        assert not at.error, (page, params, [e.value for e in at.error])
        assert at.title and at.title[0].value == texts("en", "step" if page == "step_by_step" else
                                                       SECTION_OF_PAGE[page])["title"], page
        for key, expected in params.items():
            if key == "section":             # where to scroll, asked once: the page drops it once there
                assert at.query_params.get(key) is None, page
                continue
            if key in at.session_state:      # the widget holding the setting
                assert _same(expected, at.session_state[key]), (page, key, expected, at.session_state[key])
            assert _same(expected, at.query_params.get(key)), (page, key, expected, at.query_params.get(key))


# ---- practice cards ------------------------------------------------------------------------
def test_cards_show_the_question_first_and_reveal_the_answer_on_demand():
    at = open_interview()
    text = shown(at)
    assert EN["scenario_q"] in text and EN["scenario_a"] not in text
    assert EN["direct_q"] in text and EN["direct_a"] not in text
    at.button(key="iv_reveal_scenario").click().run()
    text = shown(at)
    assert EN["scenario_a"] in text and EN["direct_a"] not in text
    assert at.button(key="iv_reveal_scenario").label == EN["hide"]
    at.button(key="iv_reveal_scenario").click().run()
    assert EN["scenario_a"] not in shown(at)


def test_the_chain_card_asks_one_follow_up_at_a_time():
    at = open_interview()
    text = shown(at)
    assert EN["chain_q1"] in text and EN["chain_q2"] not in text and EN["chain_a1"] not in text
    for n in range(1, 5):
        at.button(key="iv_reveal_chain").click().run()
        assert EN[f"chain_a{n}"] in shown(at)
        at.button(key="iv_chain_next").click().run()
        text = shown(at)
        assert EN[f"chain_q{n + 1}"] in text and EN[f"chain_a{n + 1}"] not in text
    at.button(key="iv_reveal_chain").click().run()
    assert EN["chain_a5"] in shown(at)
    at.button(key="iv_chain_restart").click().run()
    assert EN["chain_q2"] not in shown(at)


def test_ratings_are_remembered_for_the_session():
    at = open_interview()
    at.button_group(key="iv_rate_scenario").set_value("solid").run()
    at.button_group(key="iv_rate_direct").set_value("again").run()
    assert at.session_state["iv_ratings"] == {"scenario": "solid", "direct": "again"}
    summary = EN["rating_summary"].format(rated=2, total=3, solid=1, shaky=0, again=1)
    assert summary in shown(at)
    # leave the page and come back: the widgets are rebuilt with the remembered ratings
    at.switch_page("pages/kv_cache.py").run()
    at.switch_page(INTERVIEW).run()
    assert at.button_group(key="iv_rate_scenario").value == "solid"
    assert at.button_group(key="iv_rate_direct").value == "again"
    assert at.button_group(key="iv_rate_chain").value is None
    at.button_group(key="iv_rate_scenario").set_value(None).run()
    assert at.session_state["iv_ratings"] == {"direct": "again"}


# ---- the spoken version --------------------------------------------------------------------
def test_the_timer_starts_pauses_resets_and_follows_the_cues():
    at = open_interview()
    assert at.button(key="iv_timer_go").label == EN["timer_start"]
    at.button(key="iv_timer_go").click().run()
    assert at.session_state["iv_timer_started"] is not None
    assert at.button(key="iv_timer_go").label == EN["timer_pause"]
    at.button(key="iv_timer_go").click().run()
    assert at.session_state["iv_timer_started"] is None
    at.button(key="iv_timer_reset").click().run()
    assert at.session_state["iv_timer_banked"] == 0.0
    assert [i.value for i in at.info if EN["cue_1"] in i.value]          # at 0:00 the first cue is lit
    at.session_state["iv_timer_banked"] = 120.0                        # two minutes in: the fourth cue
    at.run()
    lit = [i.value for i in at.info if "`" in i.value]
    assert len(lit) == 1 and EN["cue_4"] in lit[0]
    at.session_state["iv_timer_banked"] = 250.0
    at.run()
    assert any(EN["timer_over"] in w.value for w in at.warning)


def test_the_papers_are_cited_with_authors_year_and_venue():
    at = open_interview()
    text = shown(at)
    for key, needles in {"paper_vaswani": ("Vaswani, A.", "2017", "Attention Is All You Need", "NeurIPS"),
                         "paper_jang": ("Jang, E.", "Gu, S.", "Poole, B.", "2017", "Gumbel-Softmax", "ICLR"),
                         "paper_bengio": ("Bengio, S.", "Vinyals, O.", "Jaitly, N.", "Shazeer, N.", "2015",
                                          "Scheduled Sampling", "NeurIPS")}.items():
        assert EN[key] in text
        assert all(needle in EN[key] and needle in ZH[key] for needle in needles), key
