"""The Interview page's sampler cards: one per stage of any engine's chain. Each says what the stage does in one
sentence, its formula, the value that leaves the distribution as it is, and where each engine puts it (with how
the same name differs between engines), then links to Step by step on settings where the stage bites.

The links ask in English on the bundled SmolLM2, whatever the reader's language (as the whole-answers cards do):
a bundled-model test checks that each link's stage removes tokens, or moves probability, at the step it opens.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.model import SMOLLM2
from ui.i18n import t
from ui.shared_model import offers

PAGES = Path(__file__).resolve().parent.parent / "pages"
PROMPT = "The capital of France is"
# a text that repeats itself: the stages that read the history (penalties, DRY, n-gram blocking) bite at once
REPEAT = "One, two, three, four. One, two, three, four. One, two,"
SEE_IT = {"strategy": "sample", "seed": "0", "max_new_tokens": "12"}
LLAMA = {"sampler_order": "llama.cpp"}
# stage -> (prompt, the step the link opens on, the settings where it bites)
CARDS = {
    "repetition_penalty": (REPEAT, 1, {"repetition_penalty": "1.5"}),
    "no_repeat_ngram": (REPEAT, 1, {"no_repeat_ngram_size": "2"}),
    "penalties": (REPEAT, 1, {**LLAMA, "presence_penalty": "1", "frequency_penalty": "0.5"}),
    "dry": (REPEAT, 1, {**LLAMA, "dry_multiplier": "0.8"}),
    "temperature": (PROMPT, 1, {**LLAMA, "temperature": "0.7", "dynatemp_range": "0.5"}),
    "top_n_sigma": (PROMPT, 1, {**LLAMA, "top_n_sigma": "1"}),
    "top_k": (PROMPT, 1, {"top_k": "5"}),
    "typical_p": (PROMPT, 1, {"typical_p": "0.5"}),
    "top_p": (PROMPT, 1, {"top_p": "0.5"}),
    "min_p": (PROMPT, 1, {"min_p": "0.1"}),
    "xtc": (PROMPT, 2, {**LLAMA, "xtc_probability": "1", "xtc_threshold": "0.1"}),   # step 1: one token over 0.1
    "top_h": (PROMPT, 1, {"top_h": "0.4"}),
    "epsilon": (PROMPT, 1, {"epsilon_cutoff": "0.0009"}),
    "eta": (PROMPT, 1, {"eta_cutoff": "0.0009"}),
    "mirostat": (PROMPT, 1, {**LLAMA, "mirostat": "2"}),
}
PARTS = ("what", "formula", "neutral", "where")


def link_settings(stage: str) -> dict:
    """The Step-by-step settings of a card's link (prompt and step included), before the interface's."""
    prompt, step, settings = CARDS[stage]
    return {**SEE_IT, "prompt": prompt, "step": str(step), **settings}


def link_params(demo_params, stage: str) -> dict:
    """A link's query string: the Interview page's demo settings, then the card's own, on the bundled SmolLM2
    where this server offers it (else the server's own model)."""
    params = demo_params(link_settings(stage))
    params.update(link_settings(stage))
    params.pop("model", None)
    if offers(SMOLLM2.key):
        params["model"] = SMOLLM2.key
    return params


def sampler_cards(demo_params) -> None:
    """Every card, two to a row. demo_params: the Interview page's function that turns a page's settings into a
    link's query string."""
    st.markdown(t("sampler_cards.intro"))
    stages = list(CARDS)
    for first in range(0, len(stages), 2):
        for column, stage in zip(st.columns(2), stages[first:first + 2]):
            with column.container(border=True, key=f"iv_sc_{stage}"):
                _card(stage, demo_params)


def card_text(stage: str, part: str) -> str:
    """A part of a card (title, what, formula, neutral, where). The texts write LaTeX's braces doubled, as a
    format string does (a single brace would read as a placeholder), so each is formatted, with no values."""
    return t(f"sampler_cards.{stage}_{part}", _="")


def _card(stage: str, demo_params) -> None:
    st.markdown(f"#### {card_text(stage, 'title')}")
    st.markdown(card_text(stage, "what"))
    st.markdown(f"{t('sampler_cards.formula')} {card_text(stage, 'formula')}")
    st.markdown(f"{t('sampler_cards.neutral')} {card_text(stage, 'neutral')}")
    st.markdown(f"{t('sampler_cards.where')} {card_text(stage, 'where')}")
    if (PAGES / "step_by_step.py").is_file():
        st.page_link("pages/step_by_step.py", label=t("sampler_cards.see_it", step=CARDS[stage][1]), icon="▶️",
                     query_params=link_params(demo_params, stage))
