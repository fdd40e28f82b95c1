"""The Interview page's cards on choosing an answer by agreement: is the most likely answer the best one,
self-consistency, minimum Bayes risk in one line, and why the empty answer can be the mode.

Each answer ends with links that open Whole answers at its agreement section, on the settings whose numbers
it quotes (read off the bundled SmolLM2 chat model, asked in English in both languages, as the other
whole-answers cards do: ui.interview_answers).
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.i18n import t
from ui.interview_answers import CAPITAL, HAIKU, TREE, link_params

S = st.session_state
PAGES = Path(__file__).resolve().parent.parent / "pages"
NUMBER = "Pick a number from 1 to 10. Answer with the number only."
AGREEMENT = {**TREE, "wa_beams": "4", "wa_samples": "64", "wa_mbr_k": "16", "section": "agreement"}
# card -> its links: (text key of the label, page stem, settings the page opens with)
CARDS = {
    "best": [
        ("best_link1", "answers", {**AGREEMENT, "prompt": NUMBER, "wa_mbr": "chrf"}),
        ("best_link2", "answers", {**AGREEMENT, "prompt": CAPITAL, "wa_mbr": "chrf"}),
    ],
    "vote": [
        ("vote_link", "answers", {**AGREEMENT, "prompt": CAPITAL, "wa_mbr": "text"}),
    ],
    "mbr": [
        ("mbr_link", "answers", {**AGREEMENT, "prompt": NUMBER, "wa_mbr": "exact"}),
    ],
    "empty": [
        ("empty_link", "answers", {**AGREEMENT, "prompt": HAIKU, "wa_samples": "32", "wa_mbr": "chrf"}),
    ],
}


def _toggle(card: str) -> None:
    S[f"iv_ag_shown_{card}"] = not S.get(f"iv_ag_shown_{card}", False)


def agreement_cards(demo_params) -> None:
    """The four cards: the question first, the answer and its demos on demand.
    demo_params: the Interview page's function that turns a page's settings into a link's query string."""
    for card, links in CARDS.items():
        shown = S.get(f"iv_ag_shown_{card}", False)
        with st.container(border=True, key=f"iv_ag_card_{card}"):
            st.markdown(f"**{t('interview_agree.kind')}**")
            st.markdown(t(f"interview_agree.{card}_q"))
            st.button(t("interview.hide") if shown else t("interview.reveal"), key=f"iv_ag_reveal_{card}",
                      icon="🙈" if shown else "👀", on_click=_toggle, args=(card,))
            if not shown:
                continue
            st.markdown(t(f"interview_agree.{card}_a"))
            st.caption(t("interview.try_it"))
            for label, page, settings in links:
                if (PAGES / f"{page}.py").is_file():
                    st.page_link(f"pages/{page}.py", label=t(f"interview_agree.{label}"), icon="▶️",
                                 query_params=link_params(demo_params, page, settings))
                else:
                    st.caption(t("interview.missing_page", page=t(f"nav.{page}")))
