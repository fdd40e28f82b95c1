"""One browser history entry per thing the user did.

Streamlit's page adds a history entry for every address write (history.pushState), and one view writes more than
once without the user doing anything: a link to another page is Streamlit's own entry, then the run's write of the
page's settings, then, before a long decode, the write that lets a Stop keep the new settings. Back from an
Interview demo took three presses. This script, in the page once per tab, turns a write that changes only the query
string into a replacement of the current entry unless the user clicked or pressed a key since the last entry: the
writes that follow a navigation join it, and every change the user makes still gets its own entry.
"""
from __future__ import annotations

import streamlit as st

SCRIPT = """<script>
(() => {
  if (window.__dsOneEntry) return;            // once per tab: Streamlit keeps the document across pages
  window.__dsOneEntry = true;
  let acted = false;                          // a click or a key since the last history entry
  const mark = (e) => { if (e.isTrusted) acted = true; };
  ['pointerdown', 'keydown'].forEach(type => window.addEventListener(type, mark, true));
  window.addEventListener('popstate', () => { acted = false; });
  const push = history.pushState.bind(history), replace = history.replaceState.bind(history);
  window.__dsPushState = push;                // the browser's own pushState, for a test that makes an entry
  history.pushState = function (state, title, url) {
    const next = url === undefined || url === null ? location.href : new URL(url, location.href).href;
    const samePage = new URL(next).pathname === location.pathname;
    if (samePage && !acted) return replace(state, title, url);
    acted = false;
    return push(state, title, url);
  };
})();
</script>"""


def one_entry_per_action() -> None:
    """Put the script in the page (it shows nothing)."""
    st.html(SCRIPT, unsafe_allow_javascript=True)
