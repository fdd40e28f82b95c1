"""The Interview page's follow-up chain on structured output: JSON mode, what it costs, when it hurts.

Each answer ends with a link that opens the Structured output page on the settings that show it.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.grammar_examples import EXAMPLES
from ui.i18n import t

S = st.session_state
PAGE = Path(__file__).resolve().parent.parent / "pages" / "structured.py"
# question -> the Structured output page's settings that demonstrate its answer
DEMOS = (
    {"so_kind": "json_schema", "so_example": "city", "so_strategy": "greedy", "so_step": "1", "max_new_tokens": "32"},
    {"so_kind": "json_schema", "so_example": "person", "so_strategy": "greedy", "max_new_tokens": "64"},
    {"so_kind": "regex", "so_example": "date", "so_strategy": "greedy", "max_new_tokens": "16"},
)


def with_grammar(settings: dict) -> dict:
    """A demo's settings with its example's text: a link then sets the grammar box too, even in a session
    whose box holds another grammar."""
    return {**settings, "so_grammar": EXAMPLES[settings["so_kind"]][settings["so_example"]]}


def _next() -> None:
    S["iv_so_pos"] = min(S.get("iv_so_pos", 1) + 1, len(DEMOS))
    S["iv_so_shown"] = False


def _restart() -> None:
    S["iv_so_pos"], S["iv_so_shown"] = 1, False


def _toggle() -> None:
    S["iv_so_shown"] = not S.get("iv_so_shown", False)


def structured_chain(demo_params) -> None:
    """The card: questions asked one after the other, each answer on demand with its demo link.
    demo_params: the Interview page's function that turns a page's settings into a link's query string."""
    pos, shown = S.setdefault("iv_so_pos", 1), S.setdefault("iv_so_shown", False)
    with st.container(border=True, key="iv_so_card"):
        st.markdown(f"**{t('interview_so.kind')}** · {t('interview.chain_progress', n=pos, total=len(DEMOS))}")
        for i in range(1, pos):
            st.markdown(f"{i}. {t(f'interview_so.q{i}')}")
            st.caption(t(f"interview_so.a{i}"))
        st.markdown(f"{pos}. **{t(f'interview_so.q{pos}')}**")
        st.button(t("interview.hide") if shown else t("interview.reveal"), key="iv_so_reveal",
                  icon="🙈" if shown else "👀", on_click=_toggle)
        if shown:
            st.markdown(t(f"interview_so.a{pos}"))
            if PAGE.is_file():
                st.page_link("pages/structured.py", label=t(f"interview_so.link{pos}"), icon="▶️",
                             query_params=demo_params(with_grammar(DEMOS[pos - 1])))
            if pos < len(DEMOS):
                st.button(t("interview.next_followup"), key="iv_so_next", icon="➡️", on_click=_next, type="primary")
            else:
                st.button(t("interview.restart"), key="iv_so_restart", icon="🔁", on_click=_restart)
