"""The "Same prompt, another answer" page in AppTest, on the tiny Llama: a link with every setting, what the
page says against the study it ran (no flip shown that did not happen), the what-if labelled as one, the JSON
download, Chinese, and presentation mode."""
from __future__ import annotations

import pytest
import torch
from streamlit.testing.v1 import AppTest

import ui.shared_model
from app_helpers import ROOT, figures, install_loads, texts
from reproduce_models import near_tied
from tiny_models import tiny_llama

pytestmark = pytest.mark.usefixtures("navigation_frame")

PROMPT = "The capital of France is"
LINK = {"rp_sizes": "1,2,3", "rp_fill": "padded", "rp_prefill": "chunked", "rp_chunk": 2, "rp_dtype": "float32",
        "rp_invariant": 0, "rp_verify": 2, "max_new_tokens": 6}
EN, ZH = texts("rp"), texts("rp", "zh")


@pytest.fixture(scope="module")
def models():
    return {"plain": tiny_llama(), "tied": near_tied(tiny_llama(seed=1), 3e-8)}


@pytest.fixture
def loads(monkeypatch, models):
    which = {"name": "plain"}
    install_loads(monkeypatch, lambda name: models[which["name"]])
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield which
    torch.set_num_threads(before)
    ui.shared_model._models.clear()


def open_page(params: dict, prompt: str = PROMPT) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.session_state["prompt"] = prompt
    at.switch_page("pages/reproduce.py").run()
    assert not at.exception, at.exception
    return at


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_a_link_sets_every_control_and_the_page_says_what_the_study_found(loads):
    at = open_page(LINK)
    assert at.multiselect(key="rp_sizes").value == ["1", "2", "3"]
    assert at.radio(key="rp_fill").value == "padded" and at.radio(key="rp_prefill").value == "chunked"
    assert at.number_input(key="rp_chunk").value == 2 and at.number_input(key="rp_verify").value == 2
    study = at.session_state["rp_study"]
    s = study.settings
    assert (s.batch_sizes, s.fill, s.prefill, s.verify, s.max_new_tokens) == ((1, 2, 3), "padded", "chunked:2", 2, 6)
    statuses = [c.status for c in study.comparisons[1:]]
    assert f"**{statuses.count('tokens')}** " in markdown(at)
    # a run is named as having another text only when its tokens differ
    parted = [line for line in markdown(at).splitlines() if "from step" in line]
    assert len(parted) == statuses.count("tokens")
    figure = figures(at)[0]
    strip = next(trace for trace in figure["data"] if trace["type"] == "heatmap")
    assert len(strip["z"]) == len(study.runs) and 2 not in sum(strip["z"], [])     # no 'another token' cell
    assert EN["whatif_label"].split(":")[0] in "\n".join(i.value for i in at.info)
    assert at.get("download_button")


def test_flips_are_shown_where_they_happened(loads):
    """A near-tied model makes some batched runs write another text: the strip marks those runs' first other token
    at the step where the saved tokens differ, and nowhere else."""
    loads["name"] = "tied"
    at = open_page({**LINK, "rp_sizes": "2,3,8", "rp_verify": 0, "max_new_tokens": 10}, prompt="Beam search keeps")
    study = at.session_state["rp_study"]
    assert any(c.status == "tokens" for c in study.comparisons)
    strip = next(trace for trace in figures(at)[0]["data"] if trace["type"] == "heatmap")
    for row, (run, comparison) in zip(strip["z"], zip(study.runs, study.comparisons)):
        first = next((t for t, (a, b) in enumerate(zip(study.runs[0].token_ids, run.token_ids)) if a != b), None)
        assert (2 in row) == (first is not None)
        if first is not None:
            assert row.index(2) == first and comparison.steps[first].fragile


def test_download_is_the_study_json(loads):
    at = open_page({**LINK, "rp_sizes": "1,2", "rp_verify": 0})
    button = at.get("download_button")[0]
    report = at.session_state["rp_study"].to_dict()
    assert set(report) == {"runs", "first_divergence"} and len(report["runs"]) == 3
    assert button.proto.label == EN["download"]


def test_invariant_mode_makes_same_length_batches_identical_and_names_what_it_leaves(loads):
    at = open_page({"rp_sizes": "1,2,4", "rp_invariant": 1, "rp_verify": 2, "max_new_tokens": 5})
    study = at.session_state["rp_study"]
    assert [c.status for c in study.comparisons[1:4]] == ["identical"] * 3
    assert EN["verdict_identical"] not in [s.value for s in at.success] or study.comparisons[4].status == "identical"
    if study.comparisons[4].status != "identical":       # the verify pass is attention: the mode leaves it
        assert "verify" in markdown(at)


def test_chinese_and_presentation_mode(loads):
    at = open_page({**LINK, "lang": "zh", "present": 1})
    assert at.title[0].value == ZH["title"]
    assert ZH["whatif_header"] in [h.value for h in at.subheader]
    assert figures(at)


def test_no_batch_size_says_so_and_draws_nothing(loads):
    at = open_page({**LINK, "rp_sizes": ""})
    assert EN["no_sizes"] in [i.value for i in at.info]
    assert not figures(at)


# ---- a served model: N identical requests, on a click ----------------------------------------------------------
def test_a_served_model_gets_identical_requests_only_on_a_click(stub_server, no_local_loads):
    from app_helpers import open_app
    from served_fixtures import TWO_TOKENS

    url = stub_server(TWO_TOKENS, owned_by="llamacpp")
    at = open_app("reproduce", params={"rp_requests": 3, "rp_levels": "1,2", "server": url,
                                       "served_model": "stub-model"})
    assert at.sidebar.selectbox(key="model_choice").value == "served"
    at.sidebar.button(key="served_connect").click().run()
    assert not at.exception, at.exception
    assert stub_server.sent(url, "/v1/completions") == []          # nothing sent before the click
    at.button(key="rp_send").click().run()
    assert not at.exception, at.exception
    sent = stub_server.sent(url, "/v1/completions")
    assert len(sent) == 6 and all(s["temperature"] == 0.0 and s["logprobs"] == 2 for s in sent)
    histogram = figures(at)[0]
    assert [sum(bar["y"]) for bar in histogram["data"]] == [3, 3]
    assert EN["served_one"].split(":")[0] in "\n".join(s.value for s in at.success)
