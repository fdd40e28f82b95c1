"""The guided tour: five short steps through one decode, for first-time visitors.

Distribution, choice, tree, expected embedding, cache. Each step says what to look at
and opens the page that shows it, on the same prompt. Closing the tour (or finishing
it) hides it for the rest of the browser session: the choice is kept in session state
and in the URL (`?tour=0`), so a reload of the tab does not bring it back.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.demo import DEFAULT_PROMPT, demo_language_settings
from ui.i18n import language, t
from ui.present import presenting
from ui.settings import sync_url, url_value

PAGES = Path(__file__).resolve().parent.parent / "pages"
DONE = "tour_done"          # session state: the visitor closed or finished the tour
STEP = "tour_step"          # session state: index of the step on screen

# (text key stem, page stem, settings the page opens with)
STEPS = (
    ("distribution", "step_by_step", {"strategy": "greedy"}),
    ("choice", "step_by_step", {"strategy": "sample", "temperature": "1.0", "top_p": "0.9"}),
    ("tree", "beam_tree", {"strategy": "beam", "num_beams": "3"}),
    ("embedding", "expected_embedding", {"strategy": "soft"}),
    ("cache", "kv_cache", {"kv_strategy": "greedy"}),
)


def dismissed() -> bool:
    return bool(st.session_state.get(DONE)) or url_value("tour", "1") == "0"


def _close() -> None:
    st.session_state[DONE] = True


def _move(delta: int) -> None:
    st.session_state[STEP] = min(max(st.session_state.get(STEP, 0) + delta, 0), len(STEPS) - 1)


def tour_link_params(page_settings: dict) -> dict:
    """Query parameters for a tour link: the step's settings on the tour prompt, in the current language."""
    params = {"prompt": DEFAULT_PROMPT, "seed": "0", "max_new_tokens": "12", **page_settings,
              **demo_language_settings(), "lang": language()}
    if presenting():
        params["present"] = "1"
    return params


def guided_tour(corner=None) -> None:
    """Show the tour box at the top of the page, unless dismissed. In presentation mode the box folds into
    a button in `corner` (a container pinned to the top of the screen), so it keeps no room from the stage."""
    if dismissed():
        st.session_state[DONE] = True
        sync_url(tour="0")
        return
    if corner is None:
        _tour_box()
        return
    index = min(max(int(st.session_state.get(STEP, 0)), 0), len(STEPS) - 1)
    with corner, st.popover(t("tour.folded", step=index + 1, total=len(STEPS)), icon="🧭"):
        _tour_box()


def _tour_box() -> None:
    index = min(max(int(st.session_state.get(STEP, 0)), 0), len(STEPS) - 1)
    name, page, settings = STEPS[index]
    with st.container(border=True, key="tour_box"):
        st.markdown(f"**{t('tour.heading', step=index + 1, total=len(STEPS))} · {t(f'tour.{name}_title')}**")
        st.markdown(t(f"tour.{name}_body"))
        cols = st.columns([1, 1, 2, 1], vertical_alignment="center")
        # the tour's own buttons are plain and named for tips: the one red "▶ Next" on a page is the decoder's
        cols[0].button(t("tour.back"), key="tour_back", icon=":material/arrow_back:", on_click=_move, args=(-1,),
                       disabled=index == 0, width="stretch")
        if index < len(STEPS) - 1:
            cols[1].button(t("tour.next"), key="tour_next", icon=":material/arrow_forward:", on_click=_move,
                           args=(1,), width="stretch")
        else:
            cols[1].button(t("tour.finish"), key="tour_finish", icon="✅", on_click=_close, width="stretch")
        if (PAGES / f"{page}.py").is_file():
            cols[2].page_link(f"pages/{page}.py", label=t("tour.open", page=t(f"nav.{page}")), icon="👉",
                              query_params=tour_link_params(settings))
        cols[3].button(t("tour.close"), key="tour_close", icon=":material/close:", on_click=_close, width="stretch",
                       help=t("tour.close_help"))
