"""Presentation mode: large type, the sidebar folded away, figures as wide as the screen.

A teacher turns it on in the sidebar; the choice is kept in the URL (`?present=1`) so the
classroom view can be bookmarked. The stylesheet below is a constant: no user text and
no token text is ever passed through unsafe HTML.
"""
from __future__ import annotations

import streamlit as st

from ui.i18n import t
from ui.session import sync_url, url_value

KEY = "present"

# Bigger text and controls, no width cap on the page, figures stretched to the column.
STYLESHEET = """
<style>
[data-testid="stMain"] .block-container { max-width: 100%; padding-left: 2.5rem; padding-right: 2.5rem; }
[data-testid="stMain"] p, [data-testid="stMain"] li, [data-testid="stMain"] label,
[data-testid="stMain"] [data-testid="stCaptionContainer"] { font-size: 1.3rem; line-height: 1.6; }
[data-testid="stMain"] h1 { font-size: 3rem; }
[data-testid="stMain"] h2 { font-size: 2.3rem; }
[data-testid="stMain"] h3 { font-size: 1.8rem; }
[data-testid="stMain"] [data-testid="stMetricValue"], [data-testid="stMain"] [data-testid="stMetricValue"] p {
  font-size: 2.6rem; line-height: 1.2; }
[data-testid="stMain"] .stButton button, [data-testid="stMain"] .stPageLink a {
  min-height: 3.4rem; font-size: 1.3rem; padding: 0.5rem 1.4rem; }
[data-testid="stMain"] .stButton button p, [data-testid="stMain"] .stPageLink a p { font-size: 1.3rem; }
[data-testid="stMain"] [data-testid="stPlotlyChart"], [data-testid="stMain"] .stPlotlyChart { width: 100% !important; }
[data-testid="stMain"] code { font-size: 1.15rem; }
</style>
"""

# Keyboard shortcuts for stepping controls, shared by every page that steps through a decode.
# Streamlit shows each on its button and ignores it while the user types in a field.
SHORTCUTS = {"first": "Home", "back": "Left", "next": "Right", "play": "P"}


def presenting() -> bool:
    """Whether presentation mode is on (session first, then the URL)."""
    return bool(url_value(KEY, False, bool))


PRESENT_FONT = 17   # px for every figure's text in presentation mode (Plotly's default is 12)


def sized(fig):
    """The figure, its text enlarged for a projector when presentation mode is on."""
    if presenting():
        scale = PRESENT_FONT / 12
        # Streamlit's chart theme sizes ticks, legend and titles itself, so each is set, not just the default
        fig.update_layout(font=dict(size=PRESENT_FONT), hoverlabel=dict(font_size=PRESENT_FONT),
                          legend=dict(font=dict(size=PRESENT_FONT)), title=dict(font=dict(size=PRESENT_FONT + 3)))
        fig.update_xaxes(tickfont=dict(size=PRESENT_FONT))     # axis titles keep their size: long ones must fit
        fig.update_yaxes(tickfont=dict(size=PRESENT_FONT))
        for trace in fig.data:          # sizes a figure set itself (node labels, counts) grow alike
            font = getattr(trace, "textfont", None)
            if font is not None and font.size is not None and not isinstance(font.size, (tuple, list)):
                trace.textfont.size = round(font.size * scale)
        for note in fig.layout.annotations:
            if note.font.size is not None:
                note.font.size = round(note.font.size * scale)
    return fig


def sidebar_state() -> str:
    """The initial sidebar state for st.set_page_config."""
    return "collapsed" if presenting() else "auto"


def shortcut(action: str) -> str:
    """The keyboard shortcut for a stepping action ('first', 'back', 'next', 'play')."""
    return SHORTCUTS[action]


def _leave() -> None:
    # Forget the switch's state rather than setting it, so the switch re-reads the URL.
    st.session_state.pop(KEY, None)
    st.query_params[KEY] = "0"


def presentation_controls() -> bool:
    """The sidebar switch, and in presentation mode the stylesheet and a way out. Returns whether on."""
    on = st.sidebar.toggle(t("present.toggle"), value=presenting(), key=KEY, help=t("present.toggle_help"))
    sync_url(**{KEY: on})
    if on:
        st.markdown(STYLESHEET, unsafe_allow_html=True)
        st.caption(t("present.active_hint"))
        st.button(t("present.exit"), key="present_exit", icon="🖥️", on_click=_leave)
    return on
