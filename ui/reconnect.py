"""A tab that came back to a server process that does not know its session: say why the page redrew.

Streamlit's browser code reconnects a dropped websocket by itself and names the session it had (the third
entry of the handshake's Sec-WebSocket-Protocol header) so that the process can give it back. A process that
has no such session (it was started again, or, in a room, the tab's process died and the proxy sent the tab
to another) opens a new one and the page reruns from its address: the settings and the step come back and
the steps are decoded again (the same seed draws the same tokens), while what only the old process held
(branches, an uploaded file, a Compare's lanes) is gone. A first visit names no session, and a session the
process still has keeps its state: neither gets the note.
"""
from __future__ import annotations

import json

import streamlit as st

from ui.i18n import t

_CHECKED = "_reconnect_checked"


def _named_session(protocols: str) -> bool:
    """Whether a Sec-WebSocket-Protocol value ("streamlit, XSRF token, session id") names a session."""
    entries = [entry.strip() for entry in protocols.split(",")]
    return len(entries) >= 3 and bool(entries[2])


def came_back() -> bool:
    """True in the first run of a session that the browser opened as the continuation of another one."""
    if st.session_state.get(_CHECKED):
        return False
    st.session_state[_CHECKED] = True
    return _named_session(st.context.headers.get("Sec-Websocket-Protocol", "") or "")


def reconnect_note() -> None:
    if came_back():
        st.info(t("common.session_restarted"), icon="🔄")


# While the server does not answer, Streamlit's page shows its own dialog, "Connection error: Streamlit server is
# not responding. Are you connected to the internet?", in English, also when the room's processes stopped and the
# student's network is fine. This script (in the page once per tab, its words refreshed by each run) puts the
# app's own words in the page's language in that dialog: what may have happened and that the tab reconnects.
_OFFLINE = """<script>
(() => {
  window.__dsOffline = %(words)s;
  if (window.__dsOfflineWatch) return;
  window.__dsOfflineWatch = true;
  const rewrite = () => {
    document.querySelectorAll('[role="dialog"]').forEach(dialog => {
      const heading = dialog.querySelector('h2');
      if (!heading || !(heading.textContent === 'Connection error' || heading.dataset.dsOffline)) return;
      const words = window.__dsOffline, body = heading.nextElementSibling;
      heading.dataset.dsOffline = '1';
      if (heading.textContent !== words.title) heading.textContent = words.title;
      if (body && body.textContent !== words.body) body.textContent = words.body;
    });
  };
  new MutationObserver(rewrite).observe(document.body, {subtree: true, childList: true, characterData: true});
})();
</script>"""


def offline_words() -> None:
    """Put the script in the page, with its words in the page's language (it shows nothing itself)."""
    words = json.dumps({"title": t("common.offline_title"), "body": t("common.offline_body")}, ensure_ascii=False)
    st.html(_OFFLINE % {"words": words.replace("</", "<\\/")}, unsafe_allow_javascript=True)
