"""AppTest drives the Explorer pages (Step by step, Beam tree, Compare) on the bundled model.

Expected tokens and probabilities come from the model's logits computed here with plain
torch, not from the engine the pages use.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from figures.labels import visible

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
pytestmark = pytest.mark.bundled


def open_page(page: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def first_steps(bundled):
    """Raw next-token probabilities after the prompt, and after the prompt + the greedy token."""
    ids = bundled.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        p1 = torch.softmax(bundled.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
        top1 = int(p1.argmax())
        p2 = torch.softmax(bundled.model(input_ids=torch.tensor([ids + [top1]])).logits[0, -1].float(), -1)
    return bundled, p1, p2


def captions(at) -> str:
    """All captions, Markdown escapes removed."""
    return "\n".join(c.value for c in at.caption).replace("\\", "")


def test_step_forward_back_and_strategy(first_steps):
    lm, p1, p2 = first_steps
    tok1, tok2 = int(p1.argmax()), int(p2.argmax())
    at = open_page("pages/step_by_step.py", max_new_tokens=6, prompt=PROMPT)
    text = captions(at)
    assert f"“{visible(lm.token_texts[tok1])}”" in text and f"p = {float(p1[tok1]):.4f}" in text
    assert next(m.value for m in at.metric if m.label == "Chosen token's rank") == "1"

    at.button(key="sbs_next").click().run()
    assert not at.exception
    assert f"“{visible(lm.token_texts[tok2])}”" in captions(at)
    assert at.slider(key="sbs_slider").value == 2
    assert "step 2:" in at.html[0].value                        # two tokens in the text view now

    at.button(key="sbs_back").click().run()
    assert f"p = {float(p1[tok1]):.4f}" in captions(at)
    assert at.slider(key="sbs_slider").value == 1

    # sampling with top-p 0.5: the smallest set of tokens holding half the mass, counted by hand
    at.button_group(key="strategy").set_value("sample").run()
    at.slider(key="top_p").set_value(0.5).run()
    assert not at.exception
    sorted_p = torch.sort(p1, descending=True).values
    keep = int((torch.cumsum(sorted_p, 0) < 0.5).sum()) + 1
    tokens = "token" if keep == 1 else "tokens"             # a count of 1 takes the singular
    assert f"top-p 0.5 kept {keep} {tokens} covering {float(sorted_p[:keep].sum()):.4f}" in captions(at)
    assert next(m.value for m in at.metric if m.label == "Tokens kept") == f"{keep:,}"


def test_branch(first_steps):
    lm, p1, _ = first_steps
    second = int(torch.topk(p1, 2).indices[1])                 # the runner-up at step 1
    at = open_page("pages/step_by_step.py", max_new_tokens=4, prompt=PROMPT, strategy="greedy")
    at.selectbox(key="sbs_branch_token").set_value(second)
    at.button(key="sbs_branch").click().run()
    assert not at.exception
    assert f"You forced “{visible(lm.token_texts[second])}”" in captions(at)
    branches = at.radio(key="sbs_active_branch")
    assert len(branches.options) == 2 and branches.value == 1
    assert "forced" in at.html[0].value
    at.radio(key="sbs_active_branch").set_value(0).run()     # revisit the main line
    assert f"“{visible(lm.token_texts[int(p1.argmax())])}”" in captions(at)


def test_a_branch_label_shows_its_token_literally(first_steps):
    lm = first_steps[0]
    stars = lm.token_texts.index(" **")       # among the top 20 after a list's "-"; unescaped it renders bold
    at = open_page("pages/step_by_step.py", max_new_tokens=3, prompt="The key points are:\n-", strategy="greedy")
    at.selectbox(key="sbs_branch_token").set_value(stars)
    at.button(key="sbs_branch").click().run()
    assert not at.exception
    label = at.radio(key="sbs_active_branch").options[1]
    assert "\\*\\*" in label and "**" not in label.replace("\\*", "")


def test_beam_length_penalty_reranks_from_the_table():
    at = open_page("pages/beam_tree.py", max_new_tokens=6, prompt=PROMPT, num_beams=3)
    for lp in (0.0, 2.0):
        at.slider(key="rerank_lp").set_value(lp).run()
        assert not at.exception
        assert f"length penalty {lp:g}" in at.subheader[0].value
        table = at.table[0].value
        scores = []
        for _, row in table.iterrows():
            expected = row["cumulative logprob"] / row["tokens"] ** lp     # the formula, by hand
            shown = float(row["score (formula)"].split("=")[-1])
            assert shown == pytest.approx(expected, abs=2e-4)
            assert f"/ {row['tokens']}^{lp:g} =" in row["score (formula)"]
            scores.append(shown)
        assert scores == sorted(scores, reverse=True)


def test_bad_and_good_uploads(tmp_path):
    at = open_page("pages/beam_tree.py", max_new_tokens=4, prompt=PROMPT)
    at.file_uploader(key="beam_upload").set_value(("notes.json", b"this is not json", "application/json")).run()
    assert not at.exception
    assert any("is not a DecodeScope trace" in e.value and "not valid JSON" in e.value for e in at.error)
    at.file_uploader(key="beam_upload").set_value(("x.json", json.dumps({"schema": "other"}).encode(),
                                                   "application/json")).run()
    assert any("schema" in e.value for e in at.error)


def test_uploaded_trace_is_viewed_without_decoding():
    from engine import Candidate, DecodeConfig, Sequence, Step, Trace

    def step(i, text, p):
        c = Candidate(token_id=10 + i, text=text, logit=0.0, prob=p, logprob=math.log(p), rank=1, shaped_prob=p,
                      kept=True)
        return Step(index=i, candidates=[c], entropy=0.1, shaped_entropy=0.1, removed_mass=0.0, kept_count=1,
                    chosen_ids=[10 + i], chosen_texts=[text])

    trace = Trace(model="hand-made", prompt="Hi", prompt_token_ids=[1], config=DecodeConfig(max_new_tokens=2),
                  steps=[step(0, "<b>", 0.5), step(1, " there", 0.25)],
                  sequences=[Sequence(token_ids=[10, 11], text="<b> there", cum_logprob=math.log(0.125), score=0.0)])
    at = open_page("pages/step_by_step.py", max_new_tokens=4, prompt=PROMPT)
    at.file_uploader(key="sbs_upload").set_value(("t.json", trace.to_json().encode(), "application/json")).run()
    assert not at.exception
    assert any("Viewing a recorded trace: 2 steps" in i.value for i in at.info)
    assert "p = 0.500" in captions(at) and "&lt;b&gt;" in at.html[0].value
    at.button(key="sbs_next").click().run()
    assert "p = 0.250" in captions(at)


def test_compare_top_k_1_matches_greedy():
    at = open_page("pages/compare.py", max_new_tokens=6, prompt=PROMPT, lanes="greedy,top_k", cmp_top_k=1)
    lines = [m.value for m in at.markdown if "total logprob" in m.value]
    assert len(lines) == 2
    assert "the reference lane" in lines[0]
    assert "same tokens as greedy" in lines[1]        # top-k 1 leaves only the argmax to draw


@pytest.mark.parametrize("params", [{"temperature": "nan"}, {"temperature": "inf", "strategy": "sample"},
                                    {"seed": "-5", "top_k": "many", "top_p": "-inf"}])
def test_nonsense_in_a_hand_edited_url_falls_back_to_defaults(params):
    at = open_page("pages/step_by_step.py", max_new_tokens=2, prompt=PROMPT, **params)
    assert not at.error, [e.value for e in at.error]
    assert at.metric, "nothing was decoded"
    for key in params:
        if key in ("temperature", "top_p"):
            assert math.isfinite(float(at.query_params[key][0] if isinstance(at.query_params[key], list)
                                       else at.query_params[key]))


@pytest.mark.parametrize("params", [
    {"strategy": "sample", "temperature": "0"},        # the address is clamped into the slider's range
    {"strategy": "sample", "temperature": "1e-6"},
    {"strategy": "sample", "top_p": "0"},
    {"strategy": "sample", "top_p": "1"},
    {"strategy": "sample", "top_k": "0"},
    {"strategy": "sample", "top_k": "49153"},          # one past SmolLM2's vocabulary
    {"strategy": "beam", "num_beams": "1"},
    {"strategy": "beam", "num_beams": "33"},
    {"max_new_tokens": "1"},
    {"max_new_tokens": "1025"},
])
def test_parameters_at_and_beyond_their_bounds_in_the_url_decode(params):
    """Each setting at its edge, and one past it, on the bundled model: the page decodes, with no error."""
    at = open_page("pages/step_by_step.py", prompt=PROMPT, **params)
    assert not at.error, [e.value for e in at.error]
    assert at.metric, "nothing was decoded"
