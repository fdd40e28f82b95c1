"""The Interview page's cards on whole answers: beam search against the mode, why the mode is improbable,
sequence against token probability, entropy against varentropy, and where a base model's answers end.

Each answer ends with links that open the Whole answers page (or Beam tree) on the settings whose numbers it
quotes. Those numbers were read off a bundled model, which every link names: the SmolLM2 chat model asked in
English, in both languages; for the stop strings, the base Gemma model (no chat template) asked in Chinese.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.model import GEMMA3, SMOLLM2
from ui.i18n import t
from ui.shared_model import offers

S = st.session_state
PAGES = Path(__file__).resolve().parent.parent / "pages"
CAPITAL = "What is the capital of France? Answer in one word."
HAIKU = "Write a haiku about the sea."
SKY = "Is the sky blue? Answer yes or no."     # answers ended at a period: beam search passes the mode by
# the tree the quoted numbers come from, named in full so that a later change of the page's defaults
# does not change what the link shows
TREE = {"chat": "1", "wa_depth": "8", "wa_budget": "200", "wa_branch": "6", "wa_dist": "model"}
# a base model asked to go on with a pattern it can only end by a newline or a 。 (it almost never writes its end
# token): Gemma 3 270M, the bundled model that writes Chinese
CAPITALS_ZH = "中国的首都是北京。\n日本的首都是东京。\n法国的首都是"
GEMMA_TREE = {"model": GEMMA3.key, "chat": "0", "wa_depth": "8", "wa_budget": "200", "wa_branch": "6",
              "wa_dist": "model", "wa_beams": "4"}
# card -> its links: (text key of the label, page stem, settings the page opens with)
CARDS = {
    "beam": [
        ("beam_link1", "answers", {**TREE, "prompt": CAPITAL, "wa_beams": "2,4,8", "section": "landed"}),
        ("beam_link2", "answers", {**TREE, "prompt": HAIKU, "wa_beams": "2,4,8", "section": "landed"}),
        ("beam_link3", "answers", {**TREE, "prompt": SKY, "wa_beams": "2,4,8", "wa_stops": "period",
                                   "section": "landed"}),
    ],
    "mode": [
        ("mode_link", "answers", {**TREE, "prompt": CAPITAL, "wa_beams": "4"}),
    ],
    "length": [
        ("length_link1", "answers", {**TREE, "prompt": CAPITAL, "wa_beams": "4", "section": "ranked"}),
        ("length_link2", "beam_tree", {"num_beams": "4", "rerank_lp": "0"}),
    ],
    "entropy": [
        ("entropy_link", "answers", {**TREE, "prompt": CAPITAL, "wa_beams": "4", "section": "uncertainty"}),
    ],
    "stop": [
        ("stop_link1", "answers", {**GEMMA_TREE, "prompt": CAPITALS_ZH, "wa_stops": "newline_cjk_period"}),
        ("stop_link2", "answers", {**GEMMA_TREE, "prompt": CAPITALS_ZH, "wa_stops": "none"}),
    ],
}


def link_params(demo_params, page: str, settings: dict) -> dict:
    """A link's query string. Whole answers links ask the question they quote on the bundled model they name (the
    SmolLM2 chat model unless they say Gemma), whatever the reader's language (the Interview page's demo_params
    would swap in the language's demo prompt and model); a server that does not offer it runs its own model."""
    params = demo_params(settings)
    if page == "answers":
        params["prompt"] = settings["prompt"]
        params["chat"] = settings["chat"]
        params.pop("model", None)
        named = settings.get("model", SMOLLM2.key)
        if offers(named):
            params["model"] = named
    return params


def _toggle(card: str) -> None:
    S[f"iv_wa_shown_{card}"] = not S.get(f"iv_wa_shown_{card}", False)


def answers_cards(demo_params) -> None:
    """The four cards: the question first, the answer and its demos on demand.
    demo_params: the Interview page's function that turns a page's settings into a link's query string."""
    for card, links in CARDS.items():
        shown = S.get(f"iv_wa_shown_{card}", False)
        with st.container(border=True, key=f"iv_wa_card_{card}"):
            st.markdown(f"**{t('interview_wa.kind')}**")
            st.markdown(t(f"interview_wa.{card}_q"))
            st.button(t("interview.hide") if shown else t("interview.reveal"), key=f"iv_wa_reveal_{card}",
                      icon="🙈" if shown else "👀", on_click=_toggle, args=(card,))
            if not shown:
                continue
            st.markdown(t(f"interview_wa.{card}_a"))
            st.caption(t("interview.try_it"))
            for label, page, settings in links:
                if (PAGES / f"{page}.py").is_file():
                    st.page_link(f"pages/{page}.py", label=t(f"interview_wa.{label}"), icon="▶️",
                                 query_params=link_params(demo_params, page, settings))
                else:
                    st.caption(t("interview.missing_page", page=t(f"nav.{page}")))
