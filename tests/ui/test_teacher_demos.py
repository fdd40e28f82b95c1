"""The interview's teacher-forcing demos in both languages: each opens on a reference of its own language, scored
at once (no "written for another prompt" stop), and one the model does not write itself, so the free run parts
from it and the figures of exposure bias are drawn.

The first tests hand the tiny Llama to every load (a spy), to follow the links as a reader does; the last ones
run the bundled models (SmolLM2 for English, Gemma 3 270M for Chinese) and compare with their own greedy text,
worked out here with transformers' generate.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

import ui.shared_model
from app_helpers import INTERVIEW, figures, page_links

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
TEACHER = "pages/teacher_forcing.py"
CJK = re.compile(r"[\u4e00-\u9fff]")


def texts(lang: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / "teacher.json").read_text(encoding="utf-8"))



def teacher_links(lang: str, at: AppTest | None = None) -> list:
    """The query strings of the interview's teacher-forcing links, read off the page in `lang` (a session
    that is already open switches its language in the sidebar, as a reader does)."""
    if at is None:
        at = AppTest.from_file(APP, default_timeout=900)
        at.query_params["lang"] = lang
    at.switch_page(INTERVIEW).run()
    if at.sidebar.selectbox(key="lang").value != lang:
        at.sidebar.selectbox(key="lang").select(lang).run()
    assert not at.exception, at.exception
    links = [params for page, params in page_links(at) if page == "teacher_forcing"]
    assert len(links) == 2, page_links(at)
    return links


def follow(at: AppTest, params: dict) -> AppTest:
    """Open the teacher-forcing page the way a link does: exactly its query string."""
    at.query_params.clear()
    at.query_params.update(params)
    at.switch_page(TEACHER).run()
    assert not at.exception, at.exception
    return at


def chart_titles(at: AppTest) -> list:
    return [f["layout"].get("title", {}).get("text", "") for f in figures(at)]


# ---- the links, on the tiny model --------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_language_opens_on_a_reference_in_its_own_language(tiny_loads, lang):
    for params in teacher_links(lang):
        at = follow(AppTest.from_file(APP, default_timeout=300), params)
        reference = at.text_area(key="tf_reference").value
        assert bool(CJK.search(reference)) == (lang == "zh"), reference
        assert not at.warning, [w.value for w in at.warning]          # scored at once, no question first
        assert texts(lang)["forced_title"] in " ".join(chart_titles(at))


@pytest.mark.parametrize("link", [0, 1])
def test_a_chinese_demo_after_an_english_visit_still_opens_on_its_own_reference(tiny_loads, link):
    """The page remembers which prompt its reference belongs to; a visit in English must not leave that
    stamp on the Chinese reference a later link opens with. (One link per session: AppTest cannot run a
    radio with translated labels again once session state has set it.)"""
    at = AppTest.from_file(APP, default_timeout=300)
    english = follow(at, {"lang": "en", "max_new_tokens": "4"})
    assert not english.warning and not CJK.search(english.text_area(key="tf_reference").value)
    follow(at, teacher_links("zh", at)[link])
    assert not at.warning, [w.value for w in at.warning]
    assert CJK.search(at.text_area(key="tf_reference").value)


# ---- the real models: the reference is not what the model writes ----------------------------------------
def greedy_ids(lm, prompt: str, n: int) -> list:
    """n greedy tokens after the prompt, by transformers (end of text switched off so the length is n)."""
    ids = lm.tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        out = lm.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                do_sample=False, max_new_tokens=n, min_new_tokens=n,
                                pad_token_id=lm.tokenizer.pad_token_id or 0)
    return out[0, len(ids):].tolist()


@pytest.mark.bundled
@pytest.mark.parametrize("lang, model", [("en", "smollm2-135m"), ("zh", "gemma3-270m")])
def test_the_demos_draw_exposure_bias_with_a_reference_the_model_does_not_write(lang, model):
    ui.shared_model._models.clear()
    for params in teacher_links(lang):
        assert params.get("model", "smollm2-135m") == model
        at = follow(AppTest.from_file(APP, default_timeout=900), params)
        assert not at.warning, [w.value for w in at.warning]
        reference = at.text_area(key="tf_reference").value
        lm = ui.shared_model._models()[ui.shared_model.model_key(model)]
        ref_ids = lm.tokenizer(reference, add_special_tokens=False)["input_ids"]
        own = greedy_ids(lm, params["prompt"], len(ref_ids))
        assert own != ref_ids, "the model writes this reference itself: nothing to see"
        titles = " ".join(chart_titles(at))
        words = texts(lang)
        assert words["forced_title"] in titles and words["kl_title"] in titles     # free run vs reference drawn
        first = next(i for i, (a, b) in enumerate(zip(own, ref_ids)) if a != b)
        shown = "\n".join(m.value for m in at.markdown)
        where = {"en": "position **{}**", "zh": "位置 **{}**"}[lang].format(first + 1)
        assert where in shown, shown                             # the divergence at the position found here
    ui.shared_model._models.clear()
