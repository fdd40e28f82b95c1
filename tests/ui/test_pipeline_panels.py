"""The pipeline panels of Step by step in AppTest, on the tiny random Llama: stages, logit lens, loop escape.

Expected numbers come from transformers' processors and plain forward passes run here.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

ROOT = Path(__file__).resolve().parents[2]

from figures.labels import for_markdown, visible  # noqa: E402
from app_helpers import figures  # noqa: E402
from ui.present import PRESENT_FONT  # noqa: E402

PROMPT = "The capital of France is"


def texts(lang: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / "pipeline.json").read_text(encoding="utf-8"))


def open_step_page(folder, lang="en", present=False, **settings) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["lang"] = lang
    for key, value in settings.items():
        at.session_state[key] = value
    if present:
        at.query_params["present"] = "1"
    at.switch_page("pages/step_by_step.py")
    at.run()
    assert not at.exception, at.exception
    return at


def charts_titled(at: AppTest, title: str) -> list:
    """The Plotly specs on the page whose title holds `title` (read from the JSON: it escapes non-ASCII text)."""
    specs = figures(at)
    return [spec for spec in specs if title in str(spec["layout"].get("title", {}).get("text", ""))]


def first_logits(lm):
    ids = lm.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        return torch.tensor([ids]), lm.model(input_ids=torch.tensor([ids])).logits[:, -1].float()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_stage_table_matches_transformers_processors(tiny_llama_folder, lang):
    lm, folder = tiny_llama_folder
    at = open_step_page(folder, lang, max_new_tokens=2, strategy="sample", temperature=0.7, top_k=30, top_p=0.9)
    words = texts(lang)
    assert words["stages_title"] in [e.label for e in at.expander]
    assert any(words["stages_order"] in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert list(table[words["col_stage"]]) == [words["stage_temperature"].format(value="0.7"),
                                               words["stage_top_k"].format(value="30"),
                                               words["stage_top_p"].format(value="0.9")]
    ids, scores = first_logits(lm)
    kept = []
    for processor in (TemperatureLogitsWarper(0.7), TopKLogitsWarper(30), TopPLogitsWarper(0.9)):
        scores = processor(ids, scores.clone())
        kept.append(int((~torch.isneginf(scores)).sum()))
    assert list(table[words["col_kept"]]) == kept
    assert kept[1] == 30


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_lens_names_the_first_layer_on_top(tiny_llama_folder, lang):
    lm, folder = tiny_llama_folder
    at = open_step_page(folder, lang, max_new_tokens=2)
    at.toggle(key="sbs_lens_on").set_value(True).run()
    assert not at.exception, at.exception
    ids, logits = first_logits(lm)
    chosen = int(logits.argmax())
    with torch.no_grad():      # the lens by hand: each layer's stream through the final norm and the head
        hidden = lm.model(input_ids=ids, output_hidden_states=True).hidden_states
        tops = [int(lm.model.lm_head(lm.model.model.norm(h[0, -1])).argmax()) for h in hidden[:-1]] + [chosen]
    layer = tops.index(chosen)
    from figures.labels import for_markdown, visible

    words = texts(lang)
    assert words["lens_title"] in [e.label for e in at.expander]
    token = f"“{for_markdown(visible(lm.token_texts[chosen]))}”"
    expected = (words["lens_first_emb"].format(step=1, token=token) if layer == 0 else
                words["lens_first"].format(step=1, token=token, layer=layer, layers=lm.facts.layers))
    assert expected in [m.value for m in at.markdown]
    heatmaps = charts_titled(at, words["lens_fig_title"])
    assert len(heatmaps) == 1                                 # the lens heatmap, titled in this language


@pytest.mark.parametrize("lang, present", [("en", False), ("zh", False), ("en", True)])
def test_loop_escape_grid_and_its_button(tiny_llama_folder, lang, present):
    """Greedy loops at once on the tiny model. At a loop the repeated token is the top one, so its chance falls as
    the temperature rises and rises when tokens are cut: the best cell is the hottest one with no cut-off.
    In English, in Chinese, and in presentation mode (where the grid grows like every figure)."""
    lm, folder = tiny_llama_folder
    at = open_step_page(folder, lang, present, max_new_tokens=6)
    at.button(key="sbs_play").click().run()
    for _ in range(10):                            # each tick of Play's timer (AppTest runs no timers)
        if not at.session_state["sbs_playing"]:
            break
        at.run()
    assert not at.exception, at.exception
    words = texts(lang)
    assert words["escape_title"] in [e.label for e in at.expander]
    assert any(words["escape_exact"] in c.value for c in at.caption)       # the model is here: full logits
    # greedy writes one token t six times: t at step 0 (0-based) is first repeated at step 1;
    # at temperature 1, no cut-off, the chance of leaving there is 1 - p(t | prompt + t)
    ids = lm.tokenizer(PROMPT)["input_ids"]
    generated = at.session_state["sbs"].trace().best.token_ids
    assert len(generated) == 6 and len(set(generated)) == 1
    with torch.no_grad():
        probs = lm.model(input_ids=torch.tensor([ids + generated[:1]])).logits[0, -1].softmax(-1)
    title = words["escape_fig_title"].format(step=2)
    grid, = charts_titled(at, title)
    assert grid["data"][0]["z"][1][0] == pytest.approx(1 - float(probs[generated[1]]), abs=1e-5)
    size = grid["layout"].get("font", {}).get("size")
    assert (size == PRESENT_FONT) if present else (size != PRESENT_FONT), size
    button = at.button(key="sbs_escape_decode")
    assert button.label == words["escape_button"].format(t="2", cut=words["escape_fig_none"])
    button.click().run()
    assert not at.exception, at.exception
    state = at.session_state
    assert (state["strategy"], state["temperature"], state["top_p"], state["min_p"]) == ("sample", 2.0, 1.0, 0.0)
    assert state["sbs"].config.strategy == "sample" and state["sbs"].config.temperature == 2.0
    assert at.slider(key="sbs_slider").value == 2            # the loop's first repeated step, shown 1-based


def test_new_figures_grow_in_presentation_mode(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_step_page(folder, present=True, max_new_tokens=2, strategy="sample", temperature=0.7)
    at.toggle(key="sbs_lens_on").set_value(True).run()
    specs = figures(at)
    titles = [s["layout"].get("title", {}).get("text", "") for s in specs]
    for name in ("after each stage", "Layers x steps"):
        spec = next(s for s, title in zip(specs, titles) if name in title)
        assert spec["layout"]["font"]["size"] == 17


def uploaded_panels(root: str, lang: str):
    """Runs inside AppTest: the panels for an uploaded (hand-made) trace, with no model."""
    import streamlit as st
    from trace_builders import ESCAPE_P as P, loop_with, make_step

    from ui.pipeline import render_escape, render_lens, render_stages

    st.session_state.setdefault("lang", lang)
    trace = loop_with(make_step(9, list(zip([20, 31, 32], P[:3])), chosen=20), vocab_size=6,
                      temperature=0.7, top_p=0.9)
    render_stages(trace.steps[9], trace.config, key="up_stages", uploaded=True)
    render_lens(None, trace, 9, key="up_lens")
    render_escape(trace, key="up_escape", can_decode=False, on_decode=lambda config, step: None)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_uploaded_trace_gets_the_estimate_and_no_model_panels(lang):
    at = AppTest.from_function(uploaded_panels, kwargs=dict(root=str(ROOT), lang=lang), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    words = texts(lang)
    infos = [i.value for i in at.info]
    assert words["stages_none_old"] in infos and words["lens_needs_model"] in infos
    assert any(words["escape_tail"].format(share="90.0%") in c.value for c in at.caption)
    assert at.button(key="up_escape_decode").disabled
    grid = figures(at)[0]["data"][0]["z"]
    # temperature 1 (row 1), no cut-off: the recorded 0.5 stays 0.5, whatever the other tokens share
    assert grid[1][0] == pytest.approx(0.5, abs=1e-6)
    # temperature 2: p^(1/2) renormalised, with the missing 0.1 spread over the three other tokens
    full = [0.5, 0.25, 0.15] + [0.1 / 3] * 3
    assert grid[4][0] == pytest.approx(1 - 0.5 ** 0.5 / sum(p ** 0.5 for p in full), abs=1e-5)


@pytest.mark.parametrize("strategy", ["beam", "soft"])
def test_lens_on_beam_reads_the_best_beam_and_soft_says_why_not(tiny_llama_folder, strategy):
    lm, folder = tiny_llama_folder
    at = open_step_page(folder, max_new_tokens=3, strategy=strategy)
    at.button(key="sbs_next").click().run()
    at.toggle(key="sbs_lens_on").set_value(True).run()
    assert not at.exception, at.exception
    words = texts("en")
    assert words["stages_none_beam" if strategy == "beam" else "stages_none_settings"] in [i.value for i in at.info]
    lens_charts = [f for f in figures(at) if "Layers x steps" in json.dumps(f)]
    if strategy == "soft":
        assert not lens_charts and any("mixtures of embeddings" in i.value for i in at.info)
    else:
        spec = lens_charts[0]
        assert len(spec["data"][0]["z"]) == lm.facts.layers + 1
        assert len(spec["data"][0]["x"]) == len(at.session_state["sbs"].trace().best.token_ids)


def looping_run_without_draws(strategy: str, lang: str):
    """Runs inside AppTest: the escape panel for a hand-made run that loops from step 7 (w20 w21 three times)."""
    import streamlit as st
    from trace_builders import ESCAPE_P as P, loop_with, make_step

    from ui.pipeline import render_escape

    st.session_state.setdefault("lang", lang)
    trace = loop_with(make_step(9, list(zip([20, 31, 32, 33], P)), chosen=20), vocab_size=4, strategy=strategy)
    render_escape(trace, key="up_escape", can_decode=False)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("strategy, reason", [("beam", "beam"), ("soft", "vector"), ("gumbel", "vector")])
def test_a_loop_in_a_run_that_draws_no_token_says_why_there_is_no_grid(strategy, reason, lang):
    at = AppTest.from_function(looping_run_without_draws, kwargs=dict(strategy=strategy, lang=lang),
                               default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    words = texts(lang)
    # w20 w21 from step 7 (0-based): the loop's second copy begins at step 9, shown as step 10
    assert [i.value for i in at.info] == [words[f"escape_none_{reason}"].format(step=10)]
    assert not figures(at) and not at.button


def test_the_stage_panel_names_a_token_one_order_keeps_and_the_other_drops(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_step_page(folder, max_new_tokens=2, strategy="sample", temperature=3.0, min_p=0.2)
    _, logits = first_logits(lm)
    logits = logits[0]
    # by hand: min-p keeps logit >= top + ln(0.2); transformers applies it to logits / 3, llama.cpp to the raw ones
    after_temperature = (logits / 3.0 >= (logits / 3.0).max() + torch.log(torch.tensor(0.2)))
    raw = logits >= logits.max() + torch.log(torch.tensor(0.2))
    only = (after_temperature & ~raw).nonzero().flatten()
    assert len(only) > 0                                   # at temperature 3, transformers keeps more
    first = int(only[torch.argmax(logits[only])])
    words = texts("en")
    assert any(words["orders_kept"].format(order=words["order_transformers"],
                                           n=f"{int(after_temperature.sum()):,}") in c.value for c in at.caption)
    case = [w.value for w in at.warning if "min-p" in w.value]
    assert len(case) == 1 and words["order_llama_cpp"] + " drops it at min-p" in case[0]
    assert "“" + for_markdown(visible(lm.token_texts[first])) + "”" in case[0]
