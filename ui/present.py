"""Presentation mode: large type, the sidebar folded away, figures as wide as the screen, and the page's main
figure as tall as the window allows.

A teacher turns it on in the sidebar; the choice is kept in the URL (`?present=1`) so the
classroom view can be bookmarked. The stylesheet below is a constant: no user text and
no token text is ever passed through unsafe HTML.
"""
from __future__ import annotations

import re

import streamlit as st

from ui.chart import show_figure, show_upcoming
from ui.history import one_entry_per_action
from ui.i18n import t
from ui.reconnect import offline_words
from ui.settings import sync_url, url_value

KEY = "present"

# Bigger text and controls, no width cap on the page, figures stretched to the column; the top of the
# page is tight (it starts just below Streamlit's header; the boxes of the styles, the script and the pinned
# corner take no room in the flow), so the main figure starts on the first screen of a 1280x720 projector.
# Everything that holds text grows with it: token chips and their legend (inline sizes, hence !important),
# dropdowns and their lists of options, lane chips and tables (a canvas, so it is zoomed).
STYLESHEET = """
<style>
[data-testid="stMain"] .block-container { max-width: 100%; padding: 3.9rem 2.5rem 2rem 2.5rem; }
[data-testid="stMain"] p, [data-testid="stMain"] li, [data-testid="stMain"] label,
[data-testid="stMain"] [data-testid="stCaptionContainer"] { font-size: 1.3rem; line-height: 1.5; }
[data-testid="stMain"] h1 { font-size: 2.2rem; padding: 0 0 0.2rem 0; }
[data-testid="stMain"] h2 { font-size: 2rem; }
[data-testid="stMain"] h3 { font-size: 1.7rem; }
[data-testid="stMain"] [data-testid="stMetricValue"], [data-testid="stMain"] [data-testid="stMetricValue"] p {
  font-size: 2.3rem; line-height: 1.2; }
[data-testid="stMain"] .stButton button, [data-testid="stMain"] .stPageLink a {
  min-height: 3rem; font-size: 1.3rem; padding: 0.4rem 1.2rem; }
[data-testid="stMain"] .stButton button p, [data-testid="stMain"] .stPageLink a p { font-size: 1.3rem; }
[data-testid="stMain"] [data-testid="stPlotlyChart"], [data-testid="stMain"] .stPlotlyChart { width: 100% !important; }
[data-testid="stMain"] code { font-size: 1.15rem; }
[data-testid="stMain"] [data-testid="stHtml"] div { font-size: 1.35rem !important; }
[data-testid="stMain"] [data-testid="stHtml"] span[style*="font-size"] { font-size: 1.1rem !important; }
[data-testid="stMain"] [data-baseweb="select"] div, [data-testid="stMain"] [data-baseweb="tag"] span,
[data-testid="stMain"] input, [data-testid="stMain"] textarea,
[data-testid="stSelectboxVirtualDropdown"] [role="option"],
[data-testid="stSelectboxVirtualDropdown"] [role="option"] div {
  font-size: 1.25rem; }
[data-testid="stMain"] [data-testid="stDataFrame"] { zoom: 1.3; }
[data-testid="stMain"] [data-testid="stTable"] td,
[data-testid="stMain"] [data-testid="stTable"] th { font-size: 1.2rem; }
[data-testid="stPopoverBody"] { min-width: min(58rem, 92vw); }
[data-testid="stLayoutWrapper"]:has(> .st-key-page_style),
[data-testid="stLayoutWrapper"]:has(> .st-key-present_corner) {
  position: absolute; width: 0; height: 0; overflow: visible; }
.st-key-page_style { visibility: hidden; height: 0; overflow: hidden; }
.st-key-present_corner { position: fixed; top: 0.55rem; left: 3.6rem; z-index: 999991; width: auto; }
.st-key-present_corner .stButton button, .st-key-present_corner [data-testid="stPopover"] button {
  min-height: 2.2rem; font-size: 1rem; padding: 0.2rem 0.8rem; }
.st-key-sbs_slider_one { min-height: 75px; }
</style>
"""

# Always on, in every mode: readable contrast (at least 4.5:1) for captions and the text inside figures
# (ticks, titles, legends, notes on lines, the beam tree's node labels), in the theme's own text colour so
# light and dark themes both work; a focused sidebar link is outlined, so it no longer looks like the current page;
# Step by step's note in place of its step slider (one step so far) is as tall as the slider (68 px, 75 px in
# presentation mode, measured in Chromium), so the chart does not move down when the slider comes at step 2;
# eleven page links in the sidebar sit a little closer, so the copy-link box below them is whole at 1280x720;
# a page link in the page (the landing's list, the Interview's demos) wraps its label: Streamlit keeps it on one
# line and cuts it at the window's edge, which on a phone left every description cut.
BASE_STYLESHEET = """
<style>
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 0.82; }
.stPlotlyChart .xtick text, .stPlotlyChart .ytick text, .stPlotlyChart .y2tick text, .stPlotlyChart .g-xtitle text,
.stPlotlyChart .g-ytitle text, .stPlotlyChart .g-y2title text, .stPlotlyChart .legendtext, .stPlotlyChart .gtitle,
.stPlotlyChart .cbtitle text, .stPlotlyChart .cbaxis text,
.stPlotlyChart .annotation-text, .st-key-beam_chart .textpoint text { fill: currentColor !important;
  fill-opacity: 1 !important; }
[data-testid="stSidebarNav"] a:focus-visible {
  outline: 3px solid #1c6dd0; outline-offset: 2px; text-decoration: underline; }
[data-testid="stSidebarNav"] li, [data-testid="stSidebarNavLink"] { margin-top: 0; margin-bottom: 0; }
.st-key-sbs_slider_one { min-height: 68px; }
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] span,
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] p {
  white-space: normal; overflow: visible; text-overflow: clip; }
</style>
"""

# Keyboard shortcuts for stepping controls, shared by every page that steps through a decode.
# Streamlit shows each on its button and ignores it while the user types in a field.
SHORTCUTS = {"first": "Home", "back": "Left", "next": "Right", "play": "P"}


def presenting() -> bool:
    """Whether presentation mode is on (session first, then the URL)."""
    return bool(url_value(KEY, False, bool))


PRESENT_FONT = 17   # px for every figure's text in presentation mode (Plotly's default is 12)
BAR_LABEL_MIN = 14  # px: the smallest a label inside a bar may shrink to in presentation mode
# The height a page's main figure starts at in presentation mode, before the browser has measured the window:
# what a 1280x720 projector leaves below the title, the row of buttons and the stepping controls (about 260 px).
STAGE_HEIGHT = 450
STAGE_MIN = 300      # px: below this a figure is no longer readable; a smaller window scrolls instead
STAGE_GAP = 14       # px kept free under the figure, so its lowest labels do not touch the window's edge


def sized(fig, main: bool = False):
    """The figure, its text enlarged for a projector when presentation mode is on; the page's `main`
    figure starts at the height a 1280x720 projector leaves for it (main_chart then fits it to the window).
    A figure is sized once: a page may draw the same figure object again (Step by step keeps its figures)."""
    if presenting() and not getattr(fig, "_ds_sized", False):
        fig._ds_sized = True
        if main and (fig.layout.height or 0) > STAGE_HEIGHT:
            fig.update_layout(height=STAGE_HEIGHT)
        scale = PRESENT_FONT / 12
        # Streamlit's chart theme sizes ticks, legend and titles itself, so each is set, not just the default
        fig.update_layout(font=dict(size=PRESENT_FONT), hoverlabel=dict(font_size=PRESENT_FONT),
                          legend=dict(font=dict(size=PRESENT_FONT)), title=dict(font=dict(size=PRESENT_FONT + 3)))
        # axis titles grow like the ticks (the chart theme draws them at 14 px), and push the margins so long
        # ones still fit
        fig.update_xaxes(tickfont=dict(size=PRESENT_FONT), title_font=dict(size=PRESENT_FONT), automargin=True)
        fig.update_yaxes(tickfont=dict(size=PRESENT_FONT), title_font=dict(size=PRESENT_FONT), automargin=True)
        fig.update_layout(margin=dict(t=round((fig.layout.margin.t or 80) * 1.2)))   # room for the larger legend
        for trace in fig.data:          # sizes a figure set itself (node labels, counts) grow alike
            font = getattr(trace, "textfont", None)
            if font is not None and font.size is not None and not isinstance(font.size, (tuple, list)):
                trace.textfont.size = round(font.size * scale)
        for note in fig.layout.annotations:
            if note.font.size is not None:
                note.font.size = round(note.font.size * scale)
        # a label inside a bar shrinks to fit it, down to 9 px on a projector: at most to BAR_LABEL_MIN, and a
        # label that does not fit at that size is left to the hover
        if any(trace.type == "bar" and trace.text is not None for trace in fig.data):
            least = max(round((fig.layout.uniformtext.minsize or 0) * scale), BAR_LABEL_MIN)
            fig.update_layout(uniformtext=dict(minsize=least, mode="hide"))
    return fig


# In presentation mode the main figure's box is as tall as the window leaves below its top, measured in the
# browser (the server never knows the window: 450 px filled a 720-px projector but only 40 % of a 1080-px one).
# Streamlit then draws the figure at its box's height. A constant script: it runs again when the page or the
# window changes (at most once a frame), and sets a height only when it differs, so setting one triggers nothing.
_FIT_STAGE = """<script>
(() => {
  const fit = () => {
    const main = document.querySelector('[data-testid="stMain"]');
    const scrolled = main ? main.scrollTop : 0;
    document.querySelectorAll('[class*="st-key-stage_fit_"]').forEach(box => {
      const top = box.getBoundingClientRect().top + scrolled;
      const height = Math.max(%(min)d, Math.floor(window.innerHeight - top - %(gap)d)) + 'px';
      // the box is a container of fixed height: Streamlit sets that height on the wrapper around it
      const wrap = box.parentElement;
      if (wrap.style.height !== height) { wrap.style.flexBasis = height; wrap.style.height = height; }
    });
  };
  if (window.stageFit) { window.stageFit(); return; }
  let queued = false;            // a rerun changes the page many times a frame: measure once per frame
  const soon = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; fit(); }); } };
  window.stageFit = fit;
  window.addEventListener('resize', soon);
  new MutationObserver(soon).observe(document.body, {subtree: true, childList: true});
  fit();
})();
</script>""" % {"min": STAGE_MIN, "gap": STAGE_GAP}


def main_chart(fig, key: str, where=None, on_select=None):
    """Draw the page's main figure (`where`: a container, else here) in a chart element that stays mounted
    from one figure to the next (ui.chart), so stepping redraws the plot in place. Returns the click's
    selection on the run it causes (with on_select="rerun"), else None.

    In presentation mode it goes in a box the browser sizes to the window (see _FIT_STAGE), and fills it."""
    fig = sized(fig, main=True)
    if not presenting():
        return show_figure(fig, key, where=where, on_select=on_select)
    box = (where if where is not None else st).container(key=f"stage_fit_{key}", height=STAGE_HEIGHT, border=False)
    return show_figure(fig, key, where=box, on_select=on_select, stretch=True)


# the browser's name (KeyboardEvent.key) of each stepping shortcut's key
SHORTCUT_KEYS = {"Home": "Home", "Left": "ArrowLeft", "Right": "ArrowRight", "P": "p"}


def upcoming_chart(fig, key: str, on: str, action: str) -> None:
    """Send ahead the main figure that a press on the button `on`, or on the shortcut of `action` ('next',
    'back'), will show (None: none known yet), sized as main_chart sizes it; the press draws it at once
    (ui.chart.show_upcoming)."""
    show_upcoming(sized(fig, main=True) if fig is not None else None, key, on, stretch=presenting(),
                  shortcut=SHORTCUT_KEYS[shortcut(action)], slot=action)


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


# A chart's toolbar buttons stay for the mouse but leave the Tab order: eight stops per chart kept a
# keyboard user from reaching the controls below. A constant script; it watches for charts drawn later.
_QUIET_TOOLBARS = """<script>
const quiet = () => document.querySelectorAll('.modebar-btn, .modebar a, .modebar button')
  .forEach(el => el.setAttribute('tabindex', '-1'));
quiet();
new MutationObserver(quiet).observe(document.body, {subtree: true, childList: true});
</script>"""


def presentation_controls():
    """The sidebar switch, and in presentation mode the stylesheet and a way out, pinned in the top corner
    where they take no room from the stage. Returns that corner (a container) when on, else None."""
    on = st.sidebar.toggle(t("present.toggle"), value=presenting(), key=KEY, help=t("present.toggle_help"))
    sync_url(**{KEY: on})
    # the stylesheets and the script show nothing; in presentation mode their box is taken out of the flow
    with st.container(key="page_style"):
        st.markdown(BASE_STYLESHEET, unsafe_allow_html=True)
        st.html(_QUIET_TOOLBARS, unsafe_allow_javascript=True)
        one_entry_per_action()          # address writes that follow a navigation join its history entry
        offline_words()                 # the connection-lost dialog in the page's words and language
        if on:
            st.markdown(STYLESHEET, unsafe_allow_html=True)
            st.html(_FIT_STAGE, unsafe_allow_javascript=True)
    if not on:
        return None
    corner = st.container(key="present_corner", horizontal=True, gap="small")
    corner.button(t("present.exit"), key="present_exit", icon="🖥️", on_click=_leave, help=t("present.active_hint"))
    return corner


def stage_row(intro: str, upload: str | None = None, settings: str | None = None) -> dict:
    """The page's introduction, trace upload and settings. On screen: a caption, an expander and the page
    itself. In presentation mode: one row of popovers, so the main figure is on the first screen.
    Returns containers to fill: "upload" and "settings" (those asked for)."""
    if not presenting():
        st.caption(intro)
        out = {}
        if upload:
            out["upload"] = st.expander(upload, icon="📂")
        if settings:
            out["settings"] = st.container()
        return out
    with st.container(horizontal=True, gap="small", key="stage_row"):
        out = {}
        if settings:
            out["settings"] = st.popover(settings, icon="⚙️")
        if upload:
            out["upload"] = st.popover(upload, icon="📂")
        with st.popover(t("present.about"), icon="ℹ️"):
            st.markdown(intro)
    return out


def stage():
    """Where the page's main figure goes: in presentation mode a slot right here, above the controls and
    text that follow, so the figure is on the first screen; else None (draw it where it comes)."""
    return st.container() if presenting() else None


# Scrolls the heading with this anchor into view once the figures above it have drawn (they change
# the page's height as they render). A constant script: the anchor is checked against ANCHOR first.
_SCROLL = """<script>
for (const wait of [300, 1200, 2500]) {
  setTimeout(() => { const el = document.getElementById("%s"); if (el) el.scrollIntoView({block: "start"}); }, wait);
}
</script>"""
ANCHOR = re.compile(r"^[a-z][a-z0-9_-]{0,40}$")


def scroll_to_section(anchor: str) -> None:
    """When the address names this section (`section=<anchor>`), scroll there once and drop the request,
    so later reruns leave the reader where they are."""
    if st.query_params.get("section") != anchor or not ANCHOR.match(anchor):
        return
    st.query_params.pop("section", None)
    st.html(_SCROLL % anchor, unsafe_allow_javascript=True)
