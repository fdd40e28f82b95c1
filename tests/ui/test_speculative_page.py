"""The Speculative decoding page in AppTest, on the tiny Llama (every model load is handed it, or a tiny model
with another vocabulary for the name "other-vocabulary"): a link with every setting, bad input that keeps the
result on screen, the proof's verdicts, Chinese, and presentation mode."""
from __future__ import annotations

import pytest
import torch
from streamlit.testing.v1 import AppTest

import ui.shared_model
from engine import ModelLoadError
from app_helpers import ROOT, figures, install_loads, page_links, texts
from tiny_models import tiny_llama

pytestmark = pytest.mark.usefixtures("navigation_frame")

PROMPT = "The capital of France is Paris. The capital of Italy is"
LINK = {"sd_kind": "early-exit", "sd_layer": 1, "sd_k": 3, "sd_verify": "sample", "sd_temperature": 1.5,
        "sd_top_k": 40, "sd_top_p": 0.95, "sd_n": 3000, "seed": 4, "max_new_tokens": 8}
EN = texts("spec")


@pytest.fixture(scope="module")
def models():
    return {"tiny": tiny_llama(), "other": tiny_llama(vocab_size=320)}


@pytest.fixture
def spec_loads(monkeypatch, models):
    """The target is the tiny Llama; 'other-vocabulary' a draft with another vocabulary; 'no-such-model' fails
    as a missing model does."""
    def load(name):
        if name == "no-such-model":
            raise ModelLoadError("model 'no-such-model' was not found")
        return models["other"] if name == "other-vocabulary" else models["tiny"]

    install_loads(monkeypatch, load)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
    ui.shared_model._models.clear()


def open_page(params: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.session_state["prompt"] = PROMPT
    at.switch_page("pages/speculative.py").run()
    assert not at.exception, at.exception
    return at


def test_a_layer_beyond_the_model_is_held_to_its_last_exit(spec_loads):
    at = open_page({**LINK, "sd_layer": 40})             # a link made on a deeper model
    assert at.number_input(key="sd_layer").value == 1 and not at.error
    assert at.session_state["sd_trace"].config.draft == "early-exit:1"


def test_a_link_with_every_setting_opens_the_same_decode(spec_loads):
    at = open_page(LINK)
    trace = at.session_state["sd_trace"]
    config = trace.config
    assert (config.draft, config.draft_tokens, config.verify, config.seed, config.max_new_tokens) == \
        ("early-exit:1", 3, "sample", 4, 8)
    assert (config.temperature, config.top_k, config.top_p) == (1.5, 40, 0.95)
    assert at.number_input(key="sd_n").value == 3000
    assert [e.value for e in at.error] == []
    assert figures(at), "the strip and the position's figures"
    # the page opens on the first rejection (else the first draft), and the address names it
    rejected = [(r.index, j) for r in trace.rounds for j, d in enumerate(r.drafts) if d.status == "rejected"]
    r, j = rejected[0] if rejected else (0, 0)
    assert at.query_params["sd_pos"] == f"{r + 1}.{j + 1}"


def test_choosing_a_position_goes_into_the_address(spec_loads):
    at = open_page(LINK)
    last = at.session_state["sd_trace"].rounds[-1]
    other = f"{last.index + 1}.{'n' if last.next_id is not None else 1}"      # the last round's own token
    assert at.selectbox(key="sd_pos_box").value != other
    at.selectbox(key="sd_pos_box").set_value(other).run()
    assert not at.exception and at.query_params["sd_pos"] == other
    again = open_page({**LINK, "sd_pos": other})           # the link opens on that position
    assert again.selectbox(key="sd_pos_box").value == other


@pytest.mark.parametrize("name,named", [("no-such-model", "no\\-such\\-model"), ("other-vocabulary", "320")])
def test_bad_input_gets_one_line_and_keeps_the_result(spec_loads, name, named):
    at = open_page(LINK)
    shown = at.session_state["sd_trace"]
    charts = len(figures(at))
    at.radio(key="sd_kind").set_value("model").run()
    at.text_input(key="sd_model").input(name).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and named in errors[0], errors
    assert name != "other-vocabulary" or "share the target's vocabulary" in errors[0]
    assert at.session_state["sd_trace"] is shown and len(figures(at)) == charts     # all stays on screen


def test_the_proof_tells_the_slip_from_the_rule(spec_loads):
    at = open_page({**LINK, "sd_n": 20000})
    at.button(key="sd_prove").click().run()
    assert not at.exception
    verdicts = next(m.value for m in at.markdown if m.value.startswith("- "))
    lines = verdicts.splitlines()
    leaves = EN["verdict_leaves"].split("**")[1]
    assert len(lines) == 4
    assert leaves not in lines[0] and leaves not in lines[1], lines       # plain sampling, speculative sampling
    assert leaves in lines[2], lines                                       # the residual replaced by p
    assert leaves not in lines[3], lines                                   # ids only: exact, keeps fewer


def test_chinese_and_presentation_mode(spec_loads):
    at = open_page({**LINK, "lang": "zh", "present": 1})
    zh = texts("spec", "zh")
    assert at.title[0].value == zh["title"]
    assert not at.error


# ---- the interview's chain on speculative decoding -----------------------------------------------------------
IV = texts("interview_spec")


def spec_links(at: AppTest) -> list:
    return [(page, params) for page, params in page_links(at) if page == "speculative"]


def walk_the_chain(at: AppTest) -> list:
    """Reveal each follow-up in turn; the one demo link each answer shows."""
    links = []
    for n in range(1, 5):
        at.button(key="iv_reveal_spec_chain").click().run()
        assert not at.exception
        shown = [m.value for m in at.markdown]
        assert IV[f"a{n}"] in shown and all(IV[f"a{k}"] not in shown for k in range(n + 1, 5))
        found = spec_links(at)
        assert len(found) == 1
        links.append(found[0][1])
        at.button(key="iv_spec_next").click().run()
    return links


def test_the_speculative_chain_links_each_answer_to_a_demo(spec_loads):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.switch_page("pages/interview.py").run()
    links = walk_the_chain(at)
    assert [p["sd_verify"] for p in links] == ["sample", "sample", "greedy", "greedy"]
    assert [p.get("section") for p in links] == ["prove", "prove", "acceptance", None]
    assert all(p["lang"] == "en" and p["prompt"] for p in links)
    assert any(IV["q1"] in m.value for m in at.markdown)          # the last "next" starts the chain over


@pytest.mark.bundled
def test_the_chain_links_open_the_page_with_their_settings_on_the_bundled_model():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
    at.switch_page("pages/interview.py").run()
    links = walk_the_chain(at)
    for params in (links[0], links[3]):      # sampling with early exit; greedy with prompt lookup
        page = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
        page.query_params.update(params)
        page.switch_page("pages/speculative.py").run()
        assert not page.exception and not page.error, (params, [e.value for e in page.error])
        config = page.session_state["sd_trace"].config
        assert config.verify == params["sd_verify"] and config.draft.startswith(params["sd_kind"])
        if config.verify == "greedy":      # the page's own check against plain greedy decoding
            assert [s.value for s in page.success] == [EN["same_ids"]]


def test_a_prompt_lookup_that_finds_nothing_still_decodes_and_says_why_there_is_no_proof(spec_loads):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    for key, value in {**LINK, "sd_kind": "prompt-lookup", "sd_ngram": 2}.items():
        at.query_params[key] = str(value)
    at.session_state["prompt"] = "The capital of France is"
    at.switch_page("pages/speculative.py").run()
    assert not at.exception
    trace = at.session_state["sd_trace"]
    assert trace.config.draft == "prompt-lookup:2" and trace.rounds
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "finds no earlier occurrence" in errors[0], errors
    assert figures(at)


def _label_shown(box, shown: str | None) -> str:
    """What the browser's box shows after a run: the label the server sent with the run (set_value), else the
    label it showed before (the browser keeps its own copy of the chosen label), else the default option."""
    if box.proto.set_value:
        return box.proto.raw_value
    return shown if shown is not None else box.options[box.proto.default]


def test_the_position_box_names_the_new_runs_position_after_the_settings_change(spec_loads):
    at = open_page(LINK)
    box = at.selectbox(key="sd_pos_box")
    shown = _label_shown(box, None)
    for k in (2, 4, 5):
        at.number_input(key="sd_k").set_value(k).run()
        assert not at.exception
        box = at.selectbox(key="sd_pos_box")
        shown = _label_shown(box, shown)
        assert shown == box.options[box.index], (k, shown, box.options[box.index])


def test_the_cost_compares_runs_of_one_length_when_the_speculative_run_ends_early(monkeypatch, models):
    """The tiny Llama with its end-of-text token set to a token speculative sampling writes and plain sampling
    never does: the speculative run ends there, and plain decoding, compared with it, writes no more tokens (or
    fewer, and the page says why)."""
    install_loads(monkeypatch, lambda name: models["tiny"])
    first = open_page(LINK)
    ids, plain_ids = first.session_state["sd_trace"].best.token_ids, first.session_state["sd_plain"].best.token_ids
    end = next(i for i, token in enumerate(ids) if token not in plain_ids and token not in ids[:i])
    eos = ids[end]
    from engine.model import LoadedModel

    built = tiny_llama(eos_token_id=eos)                  # named apart: another request for the service
    ending = LoadedModel.from_parts(built.model, built.tokenizer, "tiny-llama-ending")
    install_loads(monkeypatch, lambda name: ending)
    at = open_page(LINK)
    spec, plain = at.session_state["sd_trace"], at.session_state["sd_plain"]
    assert len(spec.steps) == end + 1
    shown = "\n".join(m.value for m in at.markdown)
    if len(plain.steps) == len(spec.steps):
        assert EN["cost_text"].split("{")[0] in shown
    else:
        assert len(plain.steps) < len(spec.steps) and EN["cost_per_token"].split("{")[0] in shown
    ui.shared_model._models.clear()


def test_an_empty_second_model_box_asks_for_a_name_and_keeps_the_result(spec_loads):
    at = open_page(LINK)
    shown = at.session_state["sd_trace"]
    at.radio(key="sd_kind").set_value("model").run()
    assert not at.exception
    assert [e.value for e in at.error] == []                      # no "'model:' is not a draft"
    assert EN["model_empty"] in [i.value for i in at.info]
    assert at.session_state["sd_trace"] is shown and figures(at)
