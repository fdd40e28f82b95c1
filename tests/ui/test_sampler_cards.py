"""The Interview page's sampler cards, in AppTest on the tiny Llama: a card for every stage an engine's chain has,
in English and 中文, each with its formula, neutral value and engines, and a link that opens Step by step on
settings the page takes as written (each in ui.settings' table and in range) and that DecodeConfig accepts.
Whether each link's stage bites on the bundled model: test_sampler_cards_bite.py."""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import PAGE_BY_HASH, ROOT, texts
from engine.config import STAGE_NAMES, DecodeConfig
from ui.sampler_cards import CARDS
from ui.settings import TABLE, parse

pytestmark = [pytest.mark.apptest, pytest.mark.tiny, pytest.mark.usefixtures("navigation_frame")]
# the stages a card explains: every stage of every engine's chain but the grammar's mask (Structured output's)
STAGES = set(STAGE_NAMES) - {"grammar"}


def open_interview(lang: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params["lang"] = lang
    at.switch_page("pages/interview.py").run()
    assert not at.exception, at.exception
    return at


def test_there_is_a_card_for_every_stage():
    assert set(CARDS) == STAGES


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_card_says_what_how_neutral_and_where_and_links_to_its_stage(tiny_loads, lang):
    at = open_interview(lang)
    words = texts("sampler_cards", lang)
    shown = "\n".join(m.value for m in at.markdown)
    links = {p.proto.label: p for p in at.get("page_link")}
    for stage in STAGES:
        for part in ("title", "what", "formula", "neutral", "where"):
            assert words[f"{stage}_{part}"].format() in shown, (stage, part)
        if lang == "en":     # each card names the engines that have the stage, or says one has none
            assert any(engine in words[f"{stage}_where"].format() for engine in ("transformers", "llama.cpp", "vLLM"))
    see = [p for label, p in links.items() if label == words["see_it"].format(step=1)]
    assert see, list(links)
    found = [p for p in at.get("page_link") if p.proto.label.startswith(words["see_it"].split("{")[0])]
    assert len(found) == len(STAGES)
    for link in found:
        assert PAGE_BY_HASH[link.proto.page_script_hash] == "step_by_step"
        params = dict(parse_qsl(link.proto.query_string))
        assert params["lang"] == lang and params["strategy"] == "sample"
        fields = {}
        for key, text in params.items():
            if key in ("lang", "model", "prompt", "step"):
                continue
            assert key in TABLE, key                         # the page reads it back
            assert parse(key, text) == TABLE[key].kind(float(text) if TABLE[key].kind in (int, float) else text)
            fields[key] = parse(key, text)
        DecodeConfig(**fields).validate()                    # the page decodes with it, no refusal
