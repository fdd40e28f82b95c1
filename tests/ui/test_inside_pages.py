"""The three "inside the choice" pages in AppTest: expected embedding, teacher forcing, KV cache.

The pages run on the tiny random Llama, saved to a folder and typed into the sidebar's
model box (so no download and no bundled model). Every asserted number is worked out
here from the model's config or a plain forward pass, not read back from the page's code.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from streamlit.testing.v1 import AppTest

from app_helpers import NEW, PROMPT, figures, greedy_tokens, markdown_text, metric, open_page

ROOT = Path(__file__).resolve().parents[2]



def bytes_per_token(model) -> int:
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * 4    # K and V, float32


# ---- KV cache ---------------------------------------------------------------------------------
def test_kv_page_greedy_rows_and_bytes(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "kv_cache")
    prompt = lm.tokenizer(PROMPT)["input_ids"]
    generated = greedy_tokens(lm.model, prompt, NEW)
    rows = len(prompt) + len(generated) - 1          # the last token is chosen but not yet fed
    per_row = bytes_per_token(lm.model)
    assert per_row == 2 * 2 * 2 * 8 * 4             # 2 layers, 2 KV heads, head dim 32 / 4
    assert metric(at, "Rows (measured)") == f"{rows:,}"
    assert metric(at, "Bytes (measured)") == f"{rows * per_row / 1e6:,.2f} MB"
    assert metric(at, "Paged blocks") == str(math.ceil(rows / 16))
    assert metric(at, "Shared blocks") == "0"
    text = markdown_text(at)
    assert f"**{per_row:,} bytes**" in text and f"over {rows} rows" in text
    assert "Measured" in at.info[0].value and "Accounting" in at.info[0].value
    assert "the same rows and bytes as greedy's at every step" in text


def test_kv_page_beam_counts_every_slot(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "kv_cache", kv_strategy="beam", kv_beams=3)
    prompt = lm.tokenizer(PROMPT)["input_ids"]
    slider = at.slider(key="kv_step")
    assert slider.min == 1 and slider.value == slider.max       # steps counted from 1; opens on the last
    steps = int(slider.max)
    at.slider(key="kv_step").set_value(1).run()
    assert not at.exception
    # after the first step each of the 3 slots holds the prompt
    assert metric(at, "Rows (measured)") == f"{3 * len(prompt):,}"
    assert metric(at, "Bytes (measured)") == f"{3 * len(prompt) * bytes_per_token(lm.model) / 1e6:,.2f} MB"
    at.slider(key="kv_step").set_value(steps).run()
    assert metric(at, "Rows (measured)") == f"{3 * (len(prompt) + steps - 1):,}"
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert f"after step {steps}" in titles[0]           # the last of `steps` steps is step `steps`
    assert len(figures(at)) == 4


def test_kv_page_in_chinese(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "kv_cache", lang="zh")
    assert at.title[0].value == "KV 缓存"
    assert "实测" in at.info[0].value


# ---- teacher forcing -----------------------------------------------------------------------------
REFERENCE = " Paris. The capital of Italy is Rome."


def reference_logprob(lm) -> float:
    """log p(reference | prompt) from one plain forward pass, summed position by position."""
    prompt = lm.tokenizer(PROMPT)["input_ids"]
    ref = lm.tokenizer(REFERENCE, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([prompt + ref])).logits[0].double()
    logp = torch.log_softmax(logits, -1)
    return sum(float(logp[len(prompt) - 1 + i, tok]) for i, tok in enumerate(ref)), len(ref)


def test_teacher_page_scores_the_reference(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "teacher_forcing", tf_reference=REFERENCE, tf_eps=0.0, tf_points=3, tf_curve=True)
    expected, n = reference_logprob(lm)
    assert metric(at, "Reference tokens") == str(n)
    assert metric(at, "log p(reference)") == f"{expected:.2f}"
    assert metric(at, "Perplexity") == f"{math.exp(-expected / n):.2f}"
    # eps = 0 swaps nothing and scores exactly as teacher forcing
    assert metric(at, "Positions swapped") == f"0/{n}"
    assert [m.value for m in at.metric if m.label == "log p(reference)"][1] == f"{expected:.2f}"
    text = markdown_text(at)
    assert "**Reference:**" in text
    assert f"At eps = 0 the curve gives {expected:.2f}" in text


def test_teacher_page_eps_one_swaps_every_position(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "teacher_forcing", tf_reference=REFERENCE, tf_eps=1.0, tf_curve=False)
    _, n = reference_logprob(lm)
    assert metric(at, "Positions swapped") == f"{n}/{n}"
    # one forward pass per swapped position: free running, one token at a time
    assert metric(at, "Forward passes") == str(n)


def test_teacher_page_says_what_the_curve_costs_and_runs_it_when_asked(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "teacher_forcing", tf_reference=REFERENCE, tf_points=3)
    _, n = reference_logprob(lm)
    # a pass per span between swaps: 1 + the swapped positions before the last (seed 0's coins)
    u = torch.rand(n, generator=torch.Generator().manual_seed(0)).tolist()
    passes = sum(1 + sum(c < eps for c in u[:-1]) for eps in (0.0, 0.5, 1.0))
    assert any(f"takes {passes:,} forward passes" in c.value for c in at.caption), [c.value for c in at.caption]
    assert "At eps = 0 the curve gives" not in markdown_text(at)          # not computed until asked
    charts = len(figures(at))
    at.toggle(key="tf_curve").set_value(True).run()
    assert not at.exception
    assert len(figures(at)) == charts + 1
    assert "At eps = 0 the curve gives" in markdown_text(at)


# ---- expected embedding ---------------------------------------------------------------------------
def test_embedding_page_counts_the_cost_and_shows_the_lanes(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "expected_embedding")
    vocab, hidden = lm.model.config.vocab_size, lm.model.config.hidden_size
    assert metric(at, "Multiply-adds per step for pᵀE") == f"{vocab * hidden:,}"
    assert metric(at, "Memory for p (float32)") == f"{vocab * 4 / 1024:,.0f} KiB"
    cosine = float(metric(at, "Cosine to nearest token"))
    assert -1.0 <= cosine <= 1.0 + 1e-6
    text = markdown_text(at)
    assert "**Discrete (greedy):**" in text and "**Soft (the argmax" in text
    assert "as tau goes to 0 the sample becomes one-hot" in text
    assert len(figures(at)) >= 6


def test_embedding_page_low_temperature_makes_e_a_real_token(tiny_llama_folder):
    """With temperature 0.1 the mixture is nearly one-hot, so e is nearly its argmax token's embedding."""
    lm, folder = tiny_llama_folder
    at = open_page(folder, "expected_embedding", ee_temperature=0.1)
    cold = float(metric(at, "Cosine to nearest token"))
    at2 = open_page(folder, "expected_embedding", ee_temperature=3.0)
    hot = float(metric(at2, "Cosine to nearest token"))
    assert cold > 0.99
    assert hot < cold


# ---- presentation mode enlarges every figure's text -----------------------------------------------
def figure_font_sizes(at: AppTest) -> list:

    return [f["layout"].get("font", {}).get("size") for f in figures(at)]


def test_presentation_mode_enlarges_figure_text(tiny_llama_folder):
    from ui.present import PRESENT_FONT

    _, folder = tiny_llama_folder
    plain = figure_font_sizes(open_page(folder, "kv_cache"))
    assert plain and all(size != PRESENT_FONT for size in plain)
    big = figure_font_sizes(open_page(folder, "kv_cache", present=True))
    assert big == [PRESENT_FONT] * len(plain), big
    assert PRESENT_FONT >= 16                      # Plotly's default is 12: readable from the back of a room


def test_a_second_session_gets_teacher_forcing_and_the_soft_lane_from_memory(tiny_llama_folder, monkeypatch):
    """Teacher forcing's scores, its free run, the soft lane and the sweep are computed once per server: a new
    session opening the same page and settings is answered from memory, with the same numbers."""
    import engine.inside.embedding
    import engine.service
    import engine.inside.teacher

    lm, folder = tiny_llama_folder
    monkeypatch.setattr(engine.service, "_SHARED", engine.service.DecodeService())   # what other tests kept: gone
    calls = []
    for module, name in [(engine.inside.teacher, "teacher_force"), (engine.inside.teacher, "free_run"),
                         (engine.inside.embedding, "soft_lane"), (engine.inside.embedding, "gumbel_sweep")]:
        real = getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *a, _real=real, _name=name, **k: (calls.append(_name), _real(*a, **k))[1])
    for page, state, made in [("teacher_forcing", {"tf_reference": REFERENCE + " again", "tf_eps": 0.0},
                               {"teacher_force", "free_run"}),
                              ("expected_embedding", {}, {"soft_lane", "gumbel_sweep"})]:
        first = open_page(folder, page, **state)
        computed = list(calls)
        second = open_page(folder, page, **state)
        assert set(computed) == made and calls == computed, (page, computed, calls)     # nothing computed again
        assert [(m.label, m.value) for m in second.metric if "ms" not in m.value] == \
            [(m.label, m.value) for m in first.metric if "ms" not in m.value]
        calls.clear()
