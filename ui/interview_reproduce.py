"""The Interview page's follow-up chain on reproducibility: why temperature 0 is not reproducible on a server,
what batch invariance is and costs, whether greedy speculative decoding is bitwise lossless, and why
deterministic is not correct. Each answer ends with a link that opens "Same prompt, another answer" on the
settings that show it."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.i18n import t

S = st.session_state
PAGE = Path(__file__).resolve().parent.parent / "pages" / "reproduce.py"
# question -> the page's settings that demonstrate its answer
DEMOS = (
    {"rp_sizes": "1,2,4,8", "rp_fill": "same", "rp_prefill": "whole", "rp_dtype": "bfloat16", "rp_invariant": "0",
     "rp_verify": "0", "max_new_tokens": "24"},
    {"rp_sizes": "1,2,4,8", "rp_fill": "same", "rp_prefill": "whole", "rp_dtype": "float32", "rp_invariant": "1",
     "rp_verify": "0", "max_new_tokens": "12"},
    {"rp_sizes": "1", "rp_fill": "same", "rp_prefill": "whole", "rp_dtype": "float32", "rp_invariant": "0",
     "rp_verify": "4", "max_new_tokens": "16"},
    {"rp_sizes": "1,2,4", "rp_fill": "padded", "rp_prefill": "chunked", "rp_chunk": "4", "rp_dtype": "bfloat16",
     "rp_invariant": "1", "rp_verify": "0", "max_new_tokens": "24"},
)


def _next() -> None:
    S["iv_rp_pos"] = min(S.get("iv_rp_pos", 1) + 1, len(DEMOS))
    S["iv_rp_shown"] = False


def _restart() -> None:
    S["iv_rp_pos"], S["iv_rp_shown"] = 1, False


def _toggle() -> None:
    S["iv_rp_shown"] = not S.get("iv_rp_shown", False)


def reproduce_chain(demo_params) -> None:
    """The card: questions one after the other, each answer on demand with its demo link.
    demo_params: the Interview page's function that turns a page's settings into a link's query string."""
    pos, shown = S.setdefault("iv_rp_pos", 1), S.setdefault("iv_rp_shown", False)
    with st.container(border=True, key="iv_rp_card"):
        st.markdown(f"**{t('interview_rp.kind')}** · {t('interview.chain_progress', n=pos, total=len(DEMOS))}")
        for i in range(1, pos):
            st.markdown(f"{i}. {t(f'interview_rp.q{i}')}")
            st.caption(t(f"interview_rp.a{i}"))
        st.markdown(f"{pos}. **{t(f'interview_rp.q{pos}')}**")
        st.button(t("interview.hide") if shown else t("interview.reveal"), key="iv_rp_reveal",
                  icon="🙈" if shown else "👀", on_click=_toggle)
        if shown:
            st.markdown(t(f"interview_rp.a{pos}"))
            if PAGE.is_file():
                st.page_link("pages/reproduce.py", label=t(f"interview_rp.link{pos}"), icon="▶️",
                             query_params=demo_params(DEMOS[pos - 1]))
            if pos < len(DEMOS):
                st.button(t("interview.next_followup"), key="iv_rp_next", icon="➡️", on_click=_next, type="primary")
            else:
                st.button(t("interview.restart"), key="iv_rp_restart", icon="🔁", on_click=_restart)
