"""Teacher forcing keeps a reference with its prompt; every page numbers steps and positions from 1.

The pages run on the tiny random Llama typed into the model box. Expected texts and
numbers are worked out here with plain forward passes, not read from the page's code.
"""
from __future__ import annotations

from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]

from app_helpers import NEW, PROMPT, figures, greedy_tokens, markdown_text, metric, open_page  # noqa: E402

OTHER_PROMPT = "The best way to learn programming is"


def log_prob(lm, prompt: str, reference_ids: list) -> float:
    ids = lm.tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(input_ids=torch.tensor([ids + reference_ids])).logits[0].double(), -1)
    return sum(float(logp[len(ids) - 1 + i, tok]) for i, tok in enumerate(reference_ids))


def titles(at) -> list:
    return [f["layout"].get("title", {}).get("text", "") for f in figures(at)]


# ---- the reference belongs to its prompt ------------------------------------------------------
def test_default_reference_is_not_scored_under_another_prompt(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "teacher_forcing", prompt=OTHER_PROMPT)
    assert "another prompt" in at.warning[0].value
    assert not figures(at) and not [m for m in at.metric if m.label == "log p(reference)"]
    # back on the prompt the Paris reference was written for, it is scored again
    at.session_state["prompt"] = PROMPT
    at.run()
    assert not at.warning and metric(at, "log p(reference)")


def sampled_tokens(model, ids: list, n: int, seed: int) -> list:
    """A continuation drawn at temperature 1 by full forward passes (no cache), one seeded draw per token,
    stopping at EOS like the app."""
    draws, out = torch.Generator().manual_seed(seed), []
    with torch.no_grad():
        for _ in range(n):
            logits = model(input_ids=torch.tensor([ids + out])).logits[0, -1].float()
            out.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=draws)))
            if out[-1] == model.generation_config.eos_token_id:
                break
    return out


def test_a_sampled_continuation_becomes_the_reference_and_the_free_run_parts_from_it(tiny_llama_folder):
    """The model's greedy continuation would be the greedy free run itself: a sampled one (seed 1, beside the
    free run's seed 0) is text the model finds likely yet does not write greedily."""
    lm, folder = tiny_llama_folder
    at = open_page(folder, "teacher_forcing", prompt=OTHER_PROMPT)
    at.button(key="tf_use_sampled").click().run()
    assert not at.exception and not at.warning
    ids = sampled_tokens(lm.model, lm.tokenizer(OTHER_PROMPT)["input_ids"], NEW, seed=1)
    text = lm.tokenizer.decode(ids, skip_special_tokens=True)
    assert at.text_area(key="tf_reference").value == text
    scored = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert metric(at, "log p(reference)") == f"{log_prob(lm, OTHER_PROMPT, scored):.2f}"
    own = greedy_tokens(lm.model, lm.tokenizer(OTHER_PROMPT)["input_ids"], len(scored))
    assert own != scored
    assert not any("exactly the reference" in s.value for s in at.success)
    assert "KL(" in " ".join(titles(at))                       # the free run parts from it: the KL chart


def test_keeping_the_reference_scores_it_on_purpose(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "teacher_forcing", prompt=OTHER_PROMPT)
    at.button(key="tf_keep_reference").click().run()
    assert not at.warning and metric(at, "Reference tokens")


# ---- numbers from 1 ------------------------------------------------------------------------------
REFERENCE = " Paris. The capital of Italy is Rome."


def test_teacher_positions_count_from_one(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "teacher_forcing", tf_reference=REFERENCE, tf_eps=0.5)
    prompt = lm.tokenizer(PROMPT)["input_ids"]
    ref = lm.tokenizer(REFERENCE, add_special_tokens=False)["input_ids"]
    own = greedy_tokens(lm.model, prompt, len(ref))
    d = next(i for i, (a, b) in enumerate(zip(own, ref)) if a != b)
    assert f"position **{d + 1}**" in markdown_text(at)
    if d:
        assert f"The first {d} tokens agree" in markdown_text(at)
    # the pair of charts opens one past the divergence, titled by its 1-based position
    assert f"Position {d + 2}:" in " ".join(titles(at))
    # the swap count is in the strip's title: a seeded draw per position, swapped when below eps
    u = torch.rand(len(ref), generator=torch.Generator().manual_seed(0)).tolist()
    swapped = sum(x < 0.5 for x in u)
    assert any(f"{swapped} of {len(ref)} positions" in title for title in titles(at))


def test_embedding_slider_and_titles_count_from_one(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "expected_embedding")
    slider = at.slider(key="ee_step")
    assert slider.min == 1 and slider.max == NEW
    slider.set_value(1).run()
    assert any(title.startswith("Step 1:") for title in titles(at))
    assert not any(title.startswith("Step 0") for title in titles(at))
