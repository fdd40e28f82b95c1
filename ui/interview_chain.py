"""A follow-up chain on the Interview page: questions asked one after the other, each answer shown on demand with
a link that opens a page on the settings that show it, then the next question (the chains on structured output
and on reproducibility are two of them).

A chain called NAME keeps its place in st.session_state (iv_NAME_pos, iv_NAME_shown), names its widgets
iv_NAME_card, _reveal, _next and _restart, and reads its words from the texts section interview_NAME: kind, and
per question qN, aN and linkN."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.i18n import t

S = st.session_state
PAGES = Path(__file__).resolve().parent.parent / "pages"


def _next(name: str, length: int) -> None:
    S[f"iv_{name}_pos"] = min(S.get(f"iv_{name}_pos", 1) + 1, length)
    S[f"iv_{name}_shown"] = False


def _restart(name: str) -> None:
    S[f"iv_{name}_pos"], S[f"iv_{name}_shown"] = 1, False


def _toggle(name: str) -> None:
    S[f"iv_{name}_shown"] = not S.get(f"iv_{name}_shown", False)


def chain_card(name: str, page: str, demos: tuple, demo_params, settings_of=None) -> None:
    """The card. page: the stem of the page the links open; demos: each question's page settings;
    demo_params: the Interview page's function that turns a page's settings into a link's query string;
    settings_of(demo): what a link carries, when more than the demo's settings (default: the demo's)."""
    words = f"interview_{name}"
    pos, shown = S.setdefault(f"iv_{name}_pos", 1), S.setdefault(f"iv_{name}_shown", False)
    with st.container(border=True, key=f"iv_{name}_card"):
        st.markdown(f"**{t(f'{words}.kind')}** · {t('interview.chain_progress', n=pos, total=len(demos))}")
        for i in range(1, pos):
            st.markdown(f"{i}. {t(f'{words}.q{i}')}")
            st.caption(t(f"{words}.a{i}"))
        st.markdown(f"{pos}. **{t(f'{words}.q{pos}')}**")
        st.button(t("interview.hide") if shown else t("interview.reveal"), key=f"iv_{name}_reveal",
                  icon="🙈" if shown else "👀", on_click=_toggle, args=(name,))
        if shown:
            st.markdown(t(f"{words}.a{pos}"))
            if (PAGES / f"{page}.py").is_file():
                demo = demos[pos - 1]
                st.page_link(f"pages/{page}.py", label=t(f"{words}.link{pos}"), icon="▶️",
                             query_params=demo_params(settings_of(demo) if settings_of else demo))
            if pos < len(demos):
                st.button(t("interview.next_followup"), key=f"iv_{name}_next", icon="➡️", on_click=_next,
                          args=(name, len(demos)), type="primary")
            else:
                st.button(t("interview.restart"), key=f"iv_{name}_restart", icon="🔁", on_click=_restart,
                          args=(name,))
