"""The Interview page's cards on feeding back more than an id: Soft Thinking, Mixture of Inputs, Coconut.

Six follow-ups an interviewer asks after the standard answer, each with a short answer and links that open the
Expected embedding page's feed-back lanes (engine.soft_inputs) on the settings the answer talks about.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.i18n import t

S = st.session_state
PAGES = Path(__file__).resolve().parent.parent / "pages"
SECTION = {"section": "soft-inputs"}
# card -> its links: (text key of the label, settings of the Expected embedding page)
CARDS = {
    "contradict": [("contradict_link", {**SECTION, "si_lanes": "pte,soft-thinking", "si_k": "10"})],
    "paths": [("paths_link", {**SECTION, "si_lanes": "soft-thinking,mixture-of-inputs", "si_probe": "1",
                              "si_step": "3"})],
    "coconut": [("coconut_link", {**SECTION, "si_lanes": "soft-thinking,hidden-state", "si_probe": "1",
                                  "si_step": "2"})],
    "cost": [("cost_link", {**SECTION, "si_lanes": "pte,soft-thinking,mixture-of-inputs"})],
    "moi": [("moi_link1", {**SECTION, "si_lanes": "mixture-of-inputs,soft-thinking", "si_beta": "1"}),
            ("moi_link2", {**SECTION, "si_lanes": "mixture-of-inputs", "si_beta": "inf"})],
    "greedy": [("greedy_link1", {**SECTION, "si_lanes": "soft-thinking", "si_gumbel": "0.0"}),
               ("greedy_link2", {**SECTION, "si_lanes": "soft-thinking", "si_gumbel": "0.5", "si_cold_tau": "0.0"})],
}


def _toggle(card: str) -> None:
    S[f"iv_si_shown_{card}"] = not S.get(f"iv_si_shown_{card}", False)


def soft_input_cards(demo_params) -> None:
    """The six cards: the question first, the answer and its demos on demand.
    demo_params: the Interview page's function that turns a page's settings into a link's query string."""
    for card, links in CARDS.items():
        shown = S.get(f"iv_si_shown_{card}", False)
        with st.container(border=True, key=f"iv_si_card_{card}"):
            st.markdown(f"**{t('interview_si.kind')}**")
            st.markdown(t(f"interview_si.{card}_q"))
            st.button(t("interview.hide") if shown else t("interview.reveal"), key=f"iv_si_reveal_{card}",
                      icon="🙈" if shown else "👀", on_click=_toggle, args=(card,))
            if not shown:
                continue
            st.markdown(t(f"interview_si.{card}_a"))
            st.caption(t("interview.try_it"))
            for label, settings in links:
                if (PAGES / "expected_embedding.py").is_file():
                    st.page_link("pages/expected_embedding.py", label=t(f"interview_si.{label}"), icon="▶️",
                                 query_params=demo_params(settings))
