"""Hostile addresses and files in AppTest: a model name that looks like Markdown stays text,
a bad model name or a hidden setting out of range leaves the results on screen, and an
uploaded file never chooses which model the server loads.

Pages run on the tiny random Llama (saved to a folder); HF_HUB_OFFLINE=1 keeps every
name that is not a local folder off the network.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]

import ui.limits  # noqa: E402
import ui.shared_model  # noqa: E402  (the module that loads the pages' models, so a spy on it sees their loads)
from app_helpers import MARKDOWN_NAME, PROMPT, on_screen, open_with, unescaped  # noqa: E402


PAGES = ["step_by_step", "beam_tree", "compare", "expected_embedding", "teacher_forcing", "kv_cache"]


@pytest.fixture
def loads(monkeypatch):
    """Every name the app asks the engine to load, offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    names = []
    real = ui.shared_model.load_model

    def spy(name=None, progress=None, **placement):
        names.append(name)
        return real(name, progress=progress, **placement)

    monkeypatch.setattr(ui.shared_model, "load_model", spy)
    ui.shared_model._models.clear()          # the shared models of earlier tests in this process
    yield names
    ui.shared_model._models.clear()





# ---- 1. a name from the address is text, never a link or an image ---------------------------
def test_a_model_name_that_looks_like_markdown_is_shown_literally(loads):
    at = open_with("step_by_step", params={"model": MARKDOWN_NAME, "max_new_tokens": 2})
    messages = [e.value for e in at.error]
    assert len(messages) == 1, messages
    assert MARKDOWN_NAME in unescaped(messages[0])
    # every bracket, parenthesis and '!' is escaped, so Markdown sees neither a link nor an image
    assert not re.search(r"(?<!\\)[\[\]()!<>]", messages[0]), messages[0]
    assert loads == [MARKDOWN_NAME]


# ---- 4. a bad model name keeps the results on screen ---------------------------------------------
@pytest.mark.parametrize("page", PAGES)
def test_a_bad_model_name_names_the_problem_and_keeps_the_result(loads, tiny_llama_folder, page):
    _, folder = tiny_llama_folder
    at = open_with(page, state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4})
    assert not at.error, [e.value for e in at.error]
    before = on_screen(at)
    assert before[2] > 0, "the page drew no chart for a good model"

    at.sidebar.text_input(key="model").set_value("decodescope-test/no-such-model").run()
    assert not at.exception, at.exception
    messages = [unescaped(e.value) for e in at.error]
    assert len(messages) == 1 and "decodescope-test/no-such-model" in messages[0], messages
    assert on_screen(at) == before, f"{page}: the result on screen changed after a bad model name"
    assert any("last ones that worked" in c.value for c in at.caption)

    at.sidebar.text_input(key="model").set_value(folder).run()
    assert not at.error, [e.value for e in at.error]
    assert on_screen(at) == before
    assert loads == [folder, "decodescope-test/no-such-model"], "the good model was loaded more than once"


# ---- 4. a hidden setting out of range in the address is held in range, not an error ---------------
HIDDEN = {"num_beams": ("-3", 1), "top_p": ("5", 1.0), "tau": ("-1", 0.05), "temperature": ("0", 0.05),
          "top_k": ("-7", 0), "min_p": ("2", 0.5), "length_penalty": ("-99", -2.0)}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_a_hidden_setting_out_of_range_in_the_address_is_held_in_range(tiny_llama_folder, name):
    _, folder = tiny_llama_folder
    raw, held = HIDDEN[name]
    at = open_with("step_by_step", params={"strategy": "greedy", name: raw, "max_new_tokens": 3},
             state={"model": folder, "prompt": PROMPT})
    assert not at.error, [e.value for e in at.error]
    assert at.metric, "nothing was decoded"
    in_url = at.query_params[name]
    in_url = in_url[0] if isinstance(in_url, list) else in_url
    assert float(in_url) == pytest.approx(held)      # the edge of the control's range, as the widgets do
    strategy = "beam" if name in ("num_beams", "length_penalty") else "gumbel"
    at.button_group(key="strategy").set_value(strategy).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    control = at.number_input(key=name) if name == "top_k" else at.slider(key=name)
    assert control.value == pytest.approx(held)


# ---- 2. an uploaded file does not choose the model -----------------------------------------------
def loop_trace_on(model: str):
    from trace_builders import loop_trace, make_step

    trace = loop_trace()
    trace.steps[3] = make_step(3, [(1, 0.6), (2, 0.3), (3, 0.05), (13, 0.005)], chosen=13)
    return dataclasses.replace(trace, model=model)


def replay(at: AppTest) -> None:
    next(b for b in at.button if b.label == "Replay with greedy").click().run()
    assert not at.exception, at.exception


def test_a_replay_runs_only_on_the_model_this_user_chose(loads, tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_with("step_by_step", state={"model": folder, "prompt": PROMPT, "max_new_tokens": 2})
    hub_id = "some-org/model-named-by-a-file"
    at.file_uploader(key="sbs_upload").set_value(
        ("t.json", loop_trace_on(hub_id).to_json().encode(), "application/json")).run()
    replay(at)
    messages = [unescaped(e.value) for e in at.error]
    assert any(hub_id in m and folder in m for m in messages), messages
    assert "sbs_wh_replay" not in at.session_state
    assert loads == [folder], f"the file made the server load {loads[1:]}"

    # recorded on the model this user chose: the replay runs
    at.file_uploader(key="sbs_upload").set_value(
        ("t.json", loop_trace_on(folder).to_json().encode(), "application/json")).run()
    replay(at)
    assert not at.error, [e.value for e in at.error]
    assert at.session_state["sbs_wh_replay"]["kept"]["token_ids"][:4] == [10, 11, 12, 13]
    assert loads == [folder]


def test_a_server_pinned_to_its_models_refuses_any_other(loads, tiny_llama_folder, monkeypatch):
    _, folder = tiny_llama_folder
    monkeypatch.setenv("DECODESCOPE_MODELS", folder)
    at = open_with("step_by_step", state={"prompt": PROMPT, "max_new_tokens": 2})
    assert not at.error, [e.value for e in at.error]
    assert loads == [folder], "an empty model box opens the first offered model"
    before = on_screen(at)

    at.sidebar.text_input(key="model").set_value("HuggingFaceTB/SmolLM2-360M-Instruct").run()
    messages = [unescaped(e.value) for e in at.error]
    assert len(messages) == 1 and "offers only" in messages[0] and folder in messages[0], messages
    assert on_screen(at) == before
    assert loads == [folder], "a model the server does not offer was loaded"


# ---- 7. limits in bytes, checked before the work ----------------------------------------------------
@pytest.fixture
def encoded(monkeypatch):
    """Every prompt a page hands to the engine's tokenizing step (the first piece of real work)."""
    import importlib

    import engine.tokens
    from engine.service import shared_service

    shared_service().clear()         # results other tests left in the shared service would skip the work
    prompts = []
    real = engine.tokens.encode_prompt

    def spy(lm, prompt, *args, **kwargs):
        prompts.append(prompt)
        return real(lm, prompt, *args, **kwargs)

    for name in ("engine.decoding.runner", "engine.decoding.decoder", "engine.inside.embedding",
                 "engine.inside.teacher", "engine.inside.lens"):
        monkeypatch.setattr(importlib.import_module(name), "encode_prompt", spy)
    return prompts


@pytest.mark.parametrize("page", PAGES)
def test_a_prompt_over_the_byte_limit_is_refused_before_any_work_and_the_result_stays(tiny_llama_folder, encoded,
                                                                                      page):
    _, folder = tiny_llama_folder
    at = open_with(page, state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4})
    before = on_screen(at)
    assert before[2] > 0 and PROMPT in encoded

    big = "A language model predicts the next token. 你好 😀 " * 600          # 30,600 bytes
    at.sidebar.text_area(key="prompt").set_value(big).run()
    assert not at.exception, at.exception
    messages = [unescaped(e.value) for e in at.error]
    assert len(messages) == 1 and f"is {len(big.encode()):,} bytes" in messages[0] and "8,000" in messages[0]
    assert big not in encoded, "the page tokenized (and decoded) a prompt over the limit"
    assert on_screen(at) == before
    assert any("last ones that worked" in c.value for c in at.caption)


def test_a_prompt_is_kept_out_of_the_address_by_its_encoded_bytes(tiny_llama_folder):
    _, folder = tiny_llama_folder
    emoji = "😀" * 400                  # 400 characters, 4,800 bytes once percent-encoded
    at = open_with("step_by_step", state={"model": folder, "prompt": emoji, "max_new_tokens": 2})
    assert "prompt" not in at.query_params
    assert any("4,800 bytes" in w.value and "4,000" in w.value for w in at.warning), [w.value for w in at.warning]

    ascii_prompt = "The capital of France is Paris. " * 100          # 3,200 characters and bytes
    at.sidebar.text_area(key="prompt").set_value(ascii_prompt).run()
    in_url = at.query_params["prompt"]
    assert (in_url[0] if isinstance(in_url, list) else in_url) == ascii_prompt
    assert not at.warning


def test_compare_keeps_one_request_within_its_step_budget_and_says_so(tiny_llama_folder, monkeypatch):
    """Greedy + 4 beams + soft is 1 + 4 + 2 = 7 paths; a budget of 40 steps leaves 40 // 7 = 5 tokens a lane."""
    _, folder = tiny_llama_folder
    monkeypatch.setenv("DECODESCOPE_COMPARE_STEPS", "40")
    at = open_with("compare", params={"lanes": "greedy,beam,soft", "cmp_beams": 4},
             state={"model": folder, "prompt": PROMPT, "max_new_tokens": 20})
    assert not at.error, [e.value for e in at.error]
    notes = [i.value for i in at.info if "40 decoding steps" in i.value]
    assert len(notes) == 1 and "5 new tokens here, not 20" in notes[0], [i.value for i in at.info]
    traces = list(at.session_state["cmp_last_good"].values())
    assert len(traces) == 3 and all(trace.config.max_new_tokens == 5 for trace in traces)
    assert all(len(trace.steps) <= 5 for trace in traces)

    monkeypatch.setenv("DECODESCOPE_COMPARE_STEPS", "1000")          # room for all: no cap, no note
    at.run()
    assert not [i.value for i in at.info if "decoding steps" in i.value]
    assert {trace.config.max_new_tokens for trace in at.session_state["cmp_last_good"].values()} == {20}


def test_the_model_facts_of_an_uploaded_trace_show_its_name_literally(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_with("step_by_step", state={"model": folder, "prompt": PROMPT, "max_new_tokens": 2})
    trace = dataclasses.replace(loop_trace_on(MARKDOWN_NAME), model_facts={"name": MARKDOWN_NAME, "parameters": 1})
    at.file_uploader(key="sbs_upload").set_value(("t.json", trace.to_json().encode(), "application/json")).run()
    assert not at.exception, at.exception
    facts = [m.value for m in at.sidebar.markdown if "parameters" in m.value]
    assert len(facts) == 1
    name_line = facts[0].split("\n")[0]
    assert MARKDOWN_NAME in unescaped(name_line)
    assert not re.search(r"(?<!\\)[\[\]()!<>]", name_line), name_line


def test_a_rebuilt_model_cache_is_said_on_the_page(fake_bundled, loads):
    """The bundled path on the tiny Llama (see tests/engine/test_model_cache.py): a damaged cache is rebuilt, and
    the page that loaded it says why."""
    target, calls = fake_bundled
    at = open_with("step_by_step", state={"prompt": PROMPT, "max_new_tokens": 2})
    assert calls == [1] and not at.warning
    (target / "model.safetensors").write_bytes(b"")
    ui.shared_model._models.clear()               # a new server process: the model is read from the cache again
    at = open_with("step_by_step", state={"prompt": PROMPT, "max_new_tokens": 2})
    assert calls == [1, 1]
    notes = [unescaped(w.value) for w in at.warning]
    assert any("damaged" in n and "model.safetensors" in n and "rebuilt" in n for n in notes), notes
    assert at.metric, "nothing was decoded"


def test_a_prompt_over_the_token_limit_is_refused_before_the_forward_pass(tiny_llama_folder, encoded, monkeypatch):
    """Few bytes, many tokens (emoji are several byte tokens each): counted with the loaded model's tokenizer."""
    lm, folder = tiny_llama_folder
    monkeypatch.setattr(ui.limits, "PROMPT_LIMIT_TOKENS", 60)
    at = open_with("step_by_step", state={"model": folder, "prompt": PROMPT, "max_new_tokens": 4})
    before = on_screen(at)
    emoji = "😀🍕" * 20                              # 160 bytes
    tokens = len(lm.tokenizer(emoji)["input_ids"])
    assert len(emoji.encode()) < 8000 and tokens > 60
    at.sidebar.text_area(key="prompt").set_value(emoji).run()
    messages = [unescaped(e.value) for e in at.error]
    assert len(messages) == 1 and f"is {tokens:,} tokens" in messages[0] and "60 tokens" in messages[0], messages
    assert emoji not in encoded
    assert on_screen(at) == before
