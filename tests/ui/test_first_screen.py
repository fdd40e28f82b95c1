"""What a newcomer meets on the first screen, in AppTest: one red Next (the decoder's), and a Chinese reader
landing on the bundled model that writes Chinese, with a Chinese prompt.

The bundled models are not loaded here: a spy on the engine's load_model records what the app asks for
and hands back the tiny Llama.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.shared_model
from app_helpers import figures
from tiny_models import tiny_llama

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
ZH_PROMPT = "中国的首都是"
EN_PROMPT = "The capital of France is"
GEMMA = ("Gemma-3-270M (bundled)", "auto", "auto")
SMOLLM2 = (None, "auto", "auto")        # the default model is asked for by no name


def texts(section: str, lang: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


@pytest.fixture
def loads(monkeypatch):
    """(name, device, dtype) of every load the app asks for; each gets the tiny Llama."""
    asked = []
    lm = tiny_llama()

    def spy(name=None, progress=None, device="auto", dtype="auto"):
        asked.append((name, device, dtype))
        return lm

    monkeypatch.setattr(ui.shared_model, "load_model", spy)
    monkeypatch.delenv("DECODESCOPE_MODELS", raising=False)
    ui.shared_model._models.clear()
    yield asked
    ui.shared_model._models.clear()


def step_page(params: dict, state: dict | None = None) -> AppTest:
    """Step by step as a link opens it: only the address (and what a test puts in the session) is given."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params.update(params)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    return at


# ---- one red Next, and it decodes -------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_first_screen_has_one_red_next_and_it_is_the_decoders(loads, lang):
    at = step_page({"lang": lang, "max_new_tokens": "4"})
    tour, decoder = at.button(key="tour_next"), at.button(key="sbs_next")
    assert tour.proto.label != decoder.proto.label, "the tour's button and the decoder's read the same"
    assert tour.proto.label == texts("tour", lang)["next"] and decoder.proto.label == texts("step", lang)["next"]
    primary = [b.proto.label for b in at.button if b.proto.type == "primary"]
    assert primary == [texts("step", lang)["next"]], primary
    # the red one decodes: one more token on screen, while the tour stays on its first tip
    decoder.click().run()
    assert at.session_state["sbs"].cursor == 1
    heading = texts("tour", lang)["heading"].format(step=1, total=5)
    assert any(heading in m.value for m in at.markdown)


# ---- a Chinese reader lands on Gemma and a Chinese prompt ----------------------------------------
def test_lang_zh_lands_on_gemma_with_a_chinese_prompt(loads):
    at = step_page({"lang": "zh"})
    assert at.sidebar.text_area(key="prompt").value == ZH_PROMPT
    assert at.sidebar.selectbox(key="model_choice").value == "gemma3-270m"
    assert loads == [GEMMA], loads
    assert at.query_params["prompt"] == ZH_PROMPT and at.query_params["model"] == "gemma3-270m"   # a copied link too


def test_the_empty_model_box_names_its_model_in_chinese(loads):
    at = step_page({"lang": "zh"})
    at.sidebar.selectbox(key="model_choice").set_value("other").run()
    assert not at.exception, at.exception
    placeholder = at.sidebar.text_input(key="model").proto.placeholder
    assert placeholder.startswith("SmolLM2-135M-Instruct") and "内置" in placeholder and "bundled" not in placeholder


def test_english_reader_lands_on_smollm2_and_an_english_prompt(loads):
    at = step_page({"lang": "en"})
    assert at.sidebar.text_area(key="prompt").value == EN_PROMPT
    assert at.sidebar.selectbox(key="model_choice").value == "smollm2-135m"
    assert loads == [SMOLLM2], loads
    assert at.sidebar.text_input(key="model").proto.placeholder == "SmolLM2-135M-Instruct (bundled)"


def test_lang_zh_keeps_a_linked_prompt_and_model(loads):
    at = step_page({"lang": "zh", "prompt": "Hello", "model": "smollm2-135m"})
    assert at.sidebar.text_area(key="prompt").value == "Hello"
    assert loads == [SMOLLM2], loads


def test_lang_zh_on_a_server_without_gemma_stays_on_what_it_offers(loads, monkeypatch):
    monkeypatch.setenv("DECODESCOPE_MODELS", "bundled")
    at = step_page({"lang": "zh"})
    assert at.sidebar.text_area(key="prompt").value == EN_PROMPT      # SmolLM2 answers Chinese with noise
    assert loads == [SMOLLM2], loads


# ---- the root address says what the app is -----------------------------------------------------------
def root(params: dict) -> AppTest:
    """The app as the root address opens it: no page named."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params.update(params)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_root_address_is_a_landing_that_says_what_the_app_is(loads, lang):
    from streamlit.util import calc_hash

    at = root({"lang": lang})
    words = texts("landing", lang)
    assert [t.value for t in at.title] == ["DecodeScope"]
    assert words["what"] in [m.value for m in at.markdown]
    links = at.get("page_link")
    stems = [p.stem for p in sorted((ROOT / "pages").glob("*.py"))]
    targets = [link.proto.page_script_hash for link in links]
    assert targets[-len(stems) - 1] == calc_hash("step_by_step")        # where to start, then every page
    assert sorted(targets[-len(stems):]) == sorted(calc_hash(s) for s in stems)
    assert all(f"lang={lang}" in link.proto.query_string for link in links[-len(stems):])
    for link in links[-len(stems):]:                # each page described in the reader's language, not by a key
        assert "landing." not in link.proto.label and "nav." not in link.proto.label, link.proto.label
    assert loads == [], "the landing loads no model"
    assert not figures(at)


def test_an_old_link_to_the_root_with_settings_still_opens_step_by_step(loads):
    at = root({"lang": "en", "prompt": "Hello", "max_new_tokens": "2"})
    assert at.sidebar.text_area(key="prompt").value == "Hello"
    assert at.button(key="sbs_next")


# ---- pages that run several decodes open short --------------------------------------------------------
@pytest.mark.parametrize("name", ["compare", "beam_tree", "teacher_forcing", "kv_cache"])
def test_a_heavy_page_opens_with_a_short_decode(loads, name):
    """Opened with no length in the address, a page that decodes several times asks for LIGHT_NEW_TOKENS, fewer
    than Step by step's one decode; a length in the address still wins."""
    from ui.sidebar import LIGHT_NEW_TOKENS

    def opened(page: str, params: dict) -> int:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.query_params.update({"lang": "en", "tour": "0", **params})
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
        return at.sidebar.number_input(key="max_new_tokens").value

    assert opened(name, {}) == LIGHT_NEW_TOKENS < opened("step_by_step", {})
    assert opened(name, {"max_new_tokens": "5"}) == 5
