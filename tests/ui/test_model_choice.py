"""The sidebar's model choice, device and precision, and the Chinese demos on the model that writes Chinese.

The bundled models are not loaded here: a spy on the engine's load_model records what the app
asks for and hands back the tiny Llama. Device and precision load the tiny Llama's folder for real.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.shared_model
from app_helpers import INTERVIEW, page_links
from tiny_models import tiny_llama
from ui.sampler_cards import CARDS, link_settings

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"


def common(lang: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / "common.json").read_text(encoding="utf-8"))


@pytest.fixture
def requests(monkeypatch):
    """(name, device, dtype) of every load the app asks for; each gets the tiny Llama."""
    asked = []
    lm = tiny_llama()

    def spy(name=None, progress=None, device="auto", dtype="auto"):
        asked.append((name, device, dtype))
        return lm

    monkeypatch.setattr(ui.shared_model, "load_model", spy)
    ui.shared_model._models.clear()
    yield asked
    ui.shared_model._models.clear()


def step_page(state: dict | None = None, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params.update(params or {})
    for key, value in {"prompt": PROMPT, "max_new_tokens": 2, **(state or {})}.items():
        at.session_state[key] = value
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    return at


def test_the_choice_names_each_bundled_model_for_what_it_is(requests):
    at = step_page()
    choice = at.sidebar.selectbox(key="model_choice")
    shown = list(choice.options)
    words = common("en")
    assert shown == [words["model_choice_smollm2_135m"], words["model_choice_gemma3_270m"], words["model_choice_other"],
                     words["model_choice_served"]]
    assert "English" in shown[0] and "multilingual base" in shown[1]
    assert choice.value == "smollm2-135m"                 # an empty Model box is the bundled SmolLM2


def test_choosing_gemma_loads_it_under_its_name_and_once(requests):
    at = step_page()
    at.sidebar.selectbox(key="model_choice").set_value("gemma3-270m").run()
    assert not at.exception, at.exception
    assert at.sidebar.text_input(key="model").value == "gemma3-270m"
    assert at.query_params["model"] == "gemma3-270m"
    assert ("Gemma-3-270M (bundled)", "auto", "auto") in requests
    at.run()
    assert requests.count(("Gemma-3-270M (bundled)", "auto", "auto")) == 1, requests   # kept, not reloaded


def test_another_model_empties_the_box_for_typing_and_a_typed_name_selects_another(requests):
    at = step_page(state={"model": "gemma3-270m"})
    assert at.sidebar.selectbox(key="model_choice").value == "gemma3-270m"
    at.sidebar.selectbox(key="model_choice").set_value("other").run()
    assert at.sidebar.text_input(key="model").value == ""
    assert at.sidebar.selectbox(key="model_choice").value == "other"
    at.sidebar.text_input(key="model").set_value("some/folder").run()
    assert at.sidebar.selectbox(key="model_choice").value == "other"
    assert requests[-1] == ("some/folder", "auto", "auto")


def test_a_linked_bundled_name_and_its_aliases_share_one_loaded_model(requests):
    step_page(params={"model": "bundled"})
    step_page(params={"model": "smollm2-135m"})
    assert requests == [(None, "auto", "auto")], requests


def test_precision_in_the_sidebar_loads_in_it_and_the_facts_say_so(tiny_llama_folder):
    """bfloat16 halves the KV bytes per token: 2 (K, V) x 2 layers x 2 KV heads x head dim 8 x 2 bytes = 128."""
    _, folder = tiny_llama_folder
    ui.shared_model._models.clear()
    at = step_page(state={"model": folder})
    at.sidebar.selectbox(key="dtype").set_value("bfloat16").run()
    assert not at.exception, at.exception
    assert at.query_params["dtype"] == "bfloat16"
    facts = [m.value for m in at.sidebar.markdown if "parameters" in m.value]
    assert len(facts) == 1
    assert re.search(r"cpu, bfloat16", facts[0]) and "128 bytes" in facts[0], facts[0]
    assert at.sidebar.selectbox(key="device").options[:2] == ["auto", "cpu"]
    ui.shared_model._models.clear()


def interview_links(lang: str) -> list:
    """The demo links of the Interview page, less the sampler cards' (those ask in English on SmolLM2 in every
    language, where a bundled test checks that each stage bites: they are checked to say so)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["lang"] = lang
    at.switch_page(INTERVIEW).run()
    assert not at.exception, at.exception
    links = [params for _, params in page_links(at)]
    cards = [p for p in links if any(link_settings(stage).items() <= p.items() for stage in CARDS)]
    assert len(cards) == len(CARDS) and all(p["model"] == "smollm2-135m" for p in cards), cards
    return [p for p in links if p not in cards]


def test_chinese_demos_run_a_chinese_prompt_on_gemma(monkeypatch):
    monkeypatch.delenv("DECODESCOPE_MODELS", raising=False)
    zh = interview_links("zh")
    assert zh and all(p["prompt"] == "中国的首都是" and p["model"] == "gemma3-270m" for p in zh), zh
    en = interview_links("en")
    assert en and all(p["prompt"] == PROMPT and "model" not in p for p in en), en


def test_chinese_demos_stay_on_the_offered_model_when_gemma_is_not_offered(monkeypatch):
    monkeypatch.setenv("DECODESCOPE_MODELS", "bundled")
    zh = interview_links("zh")
    assert zh and all(p["prompt"] == PROMPT and "model" not in p for p in zh), zh
