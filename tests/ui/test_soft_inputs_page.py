"""Expected embedding's section on the feed-back rules, in AppTest on the tiny Llama typed into the sidebar.

Every number asserted is worked out here from plain forward passes of the model or from the engine's own decode
of the same settings, not read back from the page's code.
"""
from __future__ import annotations

import math

import pytest
import torch
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.testing.v1 import AppTest

from app_helpers import NEW, PROMPT, ROOT, figures, greedy_tokens, markdown_text, open_page, texts
from engine import decode
from ui import progress

pytestmark = pytest.mark.usefixtures("navigation_frame")
EN = texts("soft_inputs")


def frame(at, title_words: str) -> list:
    return [f for f in figures(at) if title_words in f["layout"]["title"]["text"]]


def test_the_section_says_what_a_small_model_cannot_show_and_runs_every_lane(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "expected_embedding", si_lanes=["pte", "soft-thinking", "mixture-of-inputs",
                                                           "hidden-state", "multi-token-mean"])
    assert any(i.value.startswith("**What a 135M model cannot show.**") for i in at.info)
    text = markdown_text(at)
    prompt = lm.tokenizer(PROMPT)["input_ids"]
    greedy = lm.tokenizer.decode(greedy_tokens(lm.model, prompt, NEW))
    names = ["Greedy \\(ids\\)", "pᵀE \\(full vocabulary\\)", "Soft Thinking \\(top\\-10\\)",
             "Mixture of Inputs \\(β 1\\)", "Hidden state \\(untrained\\)", "Multi\\-token mean \\(K = 4\\)"]
    for name in names:
        assert f"**{name}**" in text, name
    assert greedy.strip().split()[0] in text
    rows = len(prompt) + NEW - 1                     # the last step's token is chosen but not yet fed
    kv = next(c.value for c in at.caption if "KV cache holds" in c.value)
    assert f"holds {rows} rows" in kv and f"the prompt's {len(prompt)}" in kv
    grid = frame(at, "The fed vector against the token")
    assert len(grid) == 1 and len({d.get("legendgroup") for d in grid[0]["data"]}) == 5
    assert "| Claim in the standard answer | Verdict | What to add |" in text
    assert not frame(at, "Probes at step")          # the probes run only on demand


def test_one_token_soft_thinking_probes_to_zero_and_scores_like_greedy(tiny_llama_folder):
    """top-1 Soft Thinking feeds ids: its probe JS(top-1) and gap are 0; its perplexity is the greedy text's,
    exp of the mean negative log-probability from one plain forward pass over prompt + greedy tokens."""
    lm, folder = tiny_llama_folder
    at = open_page(folder, "expected_embedding", si_lanes=["soft-thinking"], si_k=1, si_probe=True, si_step=3,
                   si_cold_tau=0.0)
    probes = next(df.value for df in at.dataframe if "JS vs top-1 id" in df.value.columns)
    row = probes.iloc[0]
    assert row["JS vs top-1 id"] == 0 and row["gap: f(Σwe) vs Σw f(e)"] == 0 and row["JS vs top-2 id"] > 0
    assert frame(at, "Probes at step 3")
    prompt = lm.tokenizer(PROMPT)["input_ids"]
    ids = greedy_tokens(lm.model, prompt, NEW)
    with torch.no_grad():
        logits = lm.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
    logprobs = torch.log_softmax(logits, -1)[torch.arange(NEW), torch.tensor(ids)]
    perplexity = math.exp(-float(logprobs.mean()))
    scores = next(df.value for df in at.dataframe if "Perplexity" in df.value.columns)
    assert list(scores["Perplexity"]) == pytest.approx([round(perplexity, 2)] * 2, abs=0.011)
    assert list(scores["Multiply-adds per input"]) == ["0", f"{lm.model.config.hidden_size:,}"]


def test_the_link_sets_every_setting_and_the_page_writes_them_back(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "expected_embedding", si_lanes=["soft-thinking", "mixture-of-inputs"], si_k=3,
                   si_beta="inf", si_gumbel=0.5, si_cold_tau=0.05, si_cold_l=2, si_chain=False, si_mtm_k=7)
    text = markdown_text(at)
    assert "**Soft Thinking \\(top\\-3\\), Gumbel τ 0\\.5**" in text and "**Mixture of Inputs \\(β ∞\\)**" in text
    written = at.query_params
    for key, value in {"si_lanes": "soft-thinking,mixture-of-inputs", "si_k": "3", "si_beta": "inf",
                       "si_gumbel": "0.5", "si_cold_tau": "0.05", "si_cold_l": "2", "si_chain": "0",
                       "si_mtm_k": "7", "si_probe": "0"}.items():
        assert written[key] == [value] or written[key] == value, (key, written[key])


def test_the_section_in_chinese(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "expected_embedding", lang="zh", si_probe=True)
    zh = texts("soft_inputs", "zh")
    assert any(s.value.startswith(zh["header"]) for s in at.subheader)
    assert any(i.value.startswith("**135M 的小模型看不到什么。**") for i in at.info)
    assert frame(at, "探针")


def test_stop_keeps_the_steps_every_lane_decoded(tiny_llama_folder, monkeypatch):
    """Stop pressed while the lanes decode: the next run shows the steps decoded so far, each lane equal to the
    engine's own decode of its settings, cut at the same step; the stopped note says so."""
    lm, folder = tiny_llama_folder
    stop_at = 3 * 3                                  # 3 lanes (greedy among them), 3 steps each
    draw = progress._Watch._draw
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)

    def clicked(self, fraction, left):
        if self.name == "si_lanes" and sum(self.done) == stop_at:
            progress._stop("si_lanes")
            get_script_run_ctx().script_requests.request_stop()
        draw(self, fraction, left)

    monkeypatch.setattr(progress._Watch, "_draw", clicked)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in {"model": folder, "prompt": "Stop the soft lanes", "max_new_tokens": 8,
                       "si_lanes": ["soft-thinking", "hidden-state"]}.items():
        at.session_state[key] = value
    at.switch_page("pages/expected_embedding.py").run()
    monkeypatch.setattr(progress._Watch, "_draw", draw)
    at.run()
    assert not at.exception, at.exception
    _, runs = at.session_state["_partial_si_lanes"]
    assert [len(r.trace.steps) for r in runs] == [3, 3, 3]
    for run in runs:
        alone = decode(lm, "Stop the soft lanes", run.trace.config)
        assert [s.chosen_ids for s in run.trace.steps] == [s.chosen_ids for s in alone.steps[:3]]
    assert any("Stopped" in w.value for w in at.warning)
    assert "si_runs" not in at.session_state
