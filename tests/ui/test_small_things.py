"""Small things a user trips on, in AppTest: Play's tooltip names its real pace, a served trace is offered no
logit lens, a sample trace uploaded on Beam tree gets one clear message, a copied link keeps the step.

Pages run on the tiny random Llama (typed into the Model box) or on a stand-in server.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import open_app, texts

from served_fixtures import TWO_TOKENS  # noqa: E402

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
COMPLETION = TWO_TOKENS        # the stand-in server's one answer (tests/served_fixtures.py)



def app(page: str, *, params: dict | None = None, state: dict | None = None) -> AppTest:
    return open_app(page, params=params, state=state, new_tokens=4)


# ---- Play's tooltip ----------------------------------------------------------------------------
@pytest.mark.parametrize("lang, pace", [("en", "0.1 s"), ("zh", "0.1 秒")])
def test_plays_tooltip_names_a_tenth_of_a_second(tiny_llama_folder, lang, pace):
    _, folder = tiny_llama_folder
    at = app("step_by_step", params={"lang": lang}, state={"model": folder})
    tip = at.button(key="sbs_play").proto.help
    assert pace in tip, tip
    assert "half" not in tip and "半秒" not in tip


# ---- no logit lens for a served model ----------------------------------------------------------------
def test_a_served_trace_is_offered_no_logit_lens(stub_server, tiny_llama_folder):
    url = stub_server(COMPLETION)
    at = app("step_by_step", params={"server": url})
    if at.sidebar.selectbox(key="model_choice").value != "served":
        at.sidebar.selectbox(key="model_choice").set_value("served").run()
    at.sidebar.text_input(key="server").set_value(url).run()
    at.sidebar.button(key="served_connect").click().run()
    assert not at.exception, at.exception
    assert at.session_state["sbs_served"].steps, "the served decode is on screen"
    labels = [e.proto.label for e in at.expander]
    assert texts("pipeline")["lens_title"] not in labels, labels
    assert texts("pipeline")["stages_title"] in labels          # the panels that apply stay


def test_a_local_decode_still_offers_the_logit_lens(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = app("step_by_step", state={"model": folder})
    assert texts("pipeline")["lens_title"] in [e.proto.label for e in at.expander]
    # beside the trace's download, the run as a lesson file (built only when clicked)
    labels = [e.proto.label for e in at.get("download_button")]
    assert labels.index(texts("export")["download_lesson"]) == labels.index(texts("export")["download_trace"]) + 1
    # the teacher's notes, one "step: note" a line; a step the run lacks is named, and the file waits for a fix
    lesson = next(e for e in at.get("download_button") if e.proto.label == texts("export")["download_lesson"])
    assert not lesson.proto.disabled
    at.text_area(key="sbs_export_lesson_notes").input("1: look here\n9: past the end").run()
    lesson = next(e for e in at.get("download_button") if e.proto.label == texts("export")["download_lesson"])
    assert lesson.proto.disabled
    named = texts("export")["lesson_note_step"].format(line=2, step=9, n=0).split("(")[0]
    assert len(at.error) == 1 and at.error[0].value.startswith(named)
    at.text_area(key="sbs_export_lesson_notes").input("1: look here\n1：再看一眼").run()     # a Chinese colon too
    lesson = next(e for e in at.get("download_button") if e.proto.label == texts("export")["download_lesson"])
    assert not lesson.proto.disabled and not at.error


# ---- a sample trace on Beam tree -----------------------------------------------------------------
def test_a_sample_trace_on_beam_tree_gets_only_the_error(tiny_llama_folder):
    from engine import DecodeConfig, decode

    lm, folder = tiny_llama_folder
    trace = decode(lm, PROMPT, DecodeConfig(strategy="sample", max_new_tokens=3, seed=1))
    at = app("beam_tree", state={"model": folder, "num_beams": 2})
    at.file_uploader(key="beam_upload").set_value(("sampled.json", trace.to_json().encode(), "application/json")).run()
    assert not at.exception, at.exception
    expected = texts("beam")["upload_no_tree"].format(strategy="sample")
    assert [e.value for e in at.error] == [expected]
    assert not at.success, [s.value for s in at.success]


# ---- the step travels in the address ---------------------------------------------------------------
def test_the_address_carries_the_step_on_screen(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = app("step_by_step", state={"model": folder})
    assert at.query_params.get("step") in (None, "1")
    at.button(key="sbs_next").click().run()
    at.button(key="sbs_next").click().run()
    assert at.query_params["step"] == "3"
    at.run()                       # opening the copy-link box runs the page again (its on_change), as here
    share = [c.value for c in at.sidebar.code]
    assert share and re.search(r"[?&]step=3(&|$)", share[0]), share


def test_a_link_with_a_step_opens_on_it(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = app("step_by_step", params={"step": 3}, state={"model": folder})
    assert at.session_state["sbs"].cursor == 2                      # step 3 is the third token, index 2
    assert at.slider(key="sbs_slider").value == 3


# ---- each saved Whole answers run gets its own file name --------------------------------------------
def test_each_answers_download_is_named_from_its_prompt_settings_and_time(tiny_loads, monkeypatch):
    """Two runs saved one after another no longer both land in decodescope-answers.json: the name carries the
    prompt (a Chinese one as written), the chat flag, the tree's settings, the distribution and the time."""
    from datetime import datetime

    import streamlit

    named = {}
    original = streamlit.download_button

    def spy(*args, **kwargs):        # the file name a browser saves under (AppTest keeps no download's name)
        named[kwargs.get("key")] = kwargs.get("file_name")
        return original(*args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", spy)
    small = {"wa_depth": 3, "wa_budget": 24, "wa_branch": 3, "wa_samples": 8}
    names = []
    for prompt, extra in (("The capital of France is", {}), ("法国的首都是", {"wa_dist": "sampler",
                                                                              "wa_temperature": 0.7})):
        open_app("answers", params={**small, **extra}, state={"prompt": prompt})
        names.append(named.pop("wa_download"))
    stamp = datetime.now().strftime("%Y%m%d")
    assert names[0].startswith("decodescope-answers-The-capital-of-France-is-depth3-budget24-branch3-model-" + stamp)
    assert names[1].startswith("decodescope-answers-法国的首都是-depth3-budget24-branch3-sampler-t0.7-k0-p1-m0-")
    assert all(name.endswith(".json") and "/" not in name for name in names)


# ---- one number format on Step by step ---------------------------------------------------------------
def test_step_by_step_writes_every_probability_one_way_and_every_entropy_another(tiny_loads):
    """A probability (or a share of one) with 4 decimals wherever Step by step writes it, as its chart's hover
    does: the step's caption, the branch list, the stage table; an entropy in nats with 3 (the metrics said
    1.48 beside the panel's 1.482). Values from the step's own record, formatted here."""
    at = app("step_by_step", state={"strategy": "sample", "temperature": 0.7, "top_k": 5})
    step = at.session_state["sbs"].current
    chosen = step.chosen
    caption = "\n".join(c.value for c in at.caption).replace("\\", "")
    assert f"p = {chosen.prob:.4f}, after shaping {chosen.shaped_prob:.4f}" in caption, caption
    assert f"covering {1 - step.removed_mass:.4f} of the mass" in caption
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[texts("step")["entropy"]] == f"{step.entropy:.3f} nats"
    assert metrics[texts("step")["varentropy"]] == f"{step.varentropy:.3f} nats²"
    branch = at.selectbox(key="sbs_branch_token")
    assert all(re.search(r"\(p = \d\.\d{4}\)$", option) for option in branch.options), branch.options
    words = texts("pipeline")
    table = at.dataframe[0].value
    assert all(re.fullmatch(r"\d\.\d{4}", value) for value in table[words["col_mass"]])
    assert all(re.search(r"\(\d\.\d{4}\)$", value) for value in table[words["col_top"]])
    shown = {column: config.get("type_config", {}).get("format")
             for column, config in json.loads(at.dataframe[0].proto.columns).items()}
    assert shown[words["col_kept"]] == shown[words["col_cut"]] == "localized"     # 49,152 as the captions write it
