"""Whole answers' agreement section in AppTest on the tiny Llama: the twin bars hold the engine's probabilities
and bounds for the settings the link gives, both languages, and a saved run reopens with its agreement
settings and every number, with no model to load."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

import ui.shared_model
from app_helpers import PROMPT, figures, open_app, texts
from engine.answers import TreeSettings
from engine.answers.agreement import AgreementSettings, agree
from engine.answers.record import from_json, to_json
from engine.answers.run import explore
from tiny_models import tiny_llama

pytestmark = [pytest.mark.apptest, pytest.mark.tiny, pytest.mark.usefixtures("navigation_frame")]
SMALL = {"wa_depth": 3, "wa_budget": 24, "wa_branch": 3, "wa_samples": 8}


def twin(at) -> dict:
    """The twin-bars figure: the one whose traces include the expected-utility bars."""
    en, zh = texts("agreement"), texts("agreement", "zh")
    return next(f for f in figures(at) if any(tr.get("name") in (en["expected"], zh["expected"]) for tr in f["data"]))


def test_the_twin_bars_are_the_engines_numbers_for_the_linked_settings(tiny_loads):
    at = open_app("answers", params={**SMALL, "wa_mbr": "chrf", "wa_mbr_k": 6})
    assert at.session_state["wa_mbr"] == "chrf" and at.session_state["wa_mbr_k"] == 6
    assert at.query_params["wa_mbr"] == "chrf" and at.query_params["wa_mbr_k"] == "6"     # the link reproduces it
    run = explore(tiny_llama(), PROMPT, TreeSettings(depth=3, budget=24, branch=3), beams=(1, 4), samples=8)
    want = agree(run, ["chrf"], 6)
    en = texts("agreement")
    fig = twin(at)
    probs = next(tr for tr in fig["data"] if tr["name"] == en["p"])
    bars = next(tr for tr in fig["data"] if tr["name"] == en["expected"])
    r = want.results["chrf"]
    assert probs["x"] == pytest.approx([c.prob for c in want.candidates], rel=1e-6)
    assert bars["x"] == pytest.approx(list(r.lower), rel=1e-6, abs=1e-12)
    whiskers = [lo + d for lo, d in zip(bars["x"], bars["error_x"]["array"])]
    assert whiskers == pytest.approx(list(r.upper), rel=1e-6)
    shown = " ".join(m.value for m in at.markdown)
    assert en["header"] in [h.value for h in at.subheader]
    assert "MAP" in shown and "MBR" in shown
    assert len(at.dataframe) >= 3          # the ranked answers, the samples, the groups


def test_chinese(tiny_loads):
    at = open_app("answers", params={**SMALL, "lang": "zh", "wa_mbr": "exact"})
    zh = texts("agreement", "zh")
    assert zh["header"] in [h.value for h in at.subheader]
    fig = twin(at)
    assert any(tr["name"] == zh["expected"] for tr in fig["data"])
    assert any(zh["strip_mode"] in m.value for m in at.markdown)


def test_a_saved_run_reopens_with_its_agreement_and_no_model(tiny_loads, monkeypatch):
    run = explore(tiny_llama(), PROMPT, TreeSettings(depth=3, budget=24, branch=3), beams=(1, 4), samples=8)
    payload = to_json(replace(run, agreement=AgreementSettings(("edit",), 5))).encode()
    at = open_app("answers", params=SMALL)

    def refuse(*args, **kwargs):
        raise AssertionError("the page loaded a model to show a saved run")

    monkeypatch.setattr(ui.shared_model, "load_model", refuse)
    ui.shared_model._models.clear()
    at.file_uploader(key="wa_upload").set_value(("run.json", payload, "application/json")).run()
    assert not at.exception, at.exception
    assert at.session_state["wa_mbr"] == "edit" and at.session_state["wa_mbr_k"] == 5
    want = agree(from_json(payload), ["edit"], 5)
    bars = next(tr for tr in twin(at)["data"] if tr["name"] == texts("agreement")["expected"])
    assert bars["x"] == pytest.approx(list(want.results["edit"].lower), rel=1e-6, abs=1e-12)
    assert json.loads(payload)["agreement"]["edit"]["limit"] == 5
