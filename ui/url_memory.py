"""Keep the URL settings when the user moves to another page.

Streamlit clears the query string on a page switch and forgets the values of widgets
that were not on the new page. Without help, a visitor who chose 中文 on one page would
be back in English on the next. So the frame remembers the query string of every run
and, after a switch, writes back what the new address left out:

- interface choices (language, presentation mode, tour dismissed) always come back;
- the other settings come back only when the switch carried no settings of its own
  (the sidebar menu). A link that opens a page with settings gets exactly those.

The query string is remembered at the start of a run too, not only at its end: a switch made
while a run is still decoding stops that run before its end (and a stopped run may no longer
write session state), and the settings a shared link opened with must survive that.
"""
from __future__ import annotations

import streamlit as st

from ui import settings

INTERFACE_KEYS = ("lang", "present", "tour")
_MEMORY = "_url_memory"     # the query string at the end of the last run
_PAGE = "_url_page"         # the page of the last run
_BY_MENU = "_url_by_menu"   # this run opened its page from another one, by the menu (no settings of its own)


def restore_interface() -> None:
    """Put back interface choices the address lost (run before any text is looked up)."""
    memory = st.session_state.get(_MEMORY, {})
    now = settings.address()
    lost = {key: memory[key] for key in INTERFACE_KEYS if key not in now and key in memory}
    if lost:
        settings.sync_url(**lost)


def restore_settings(page: str) -> None:
    """After a switch to `page` that carried no settings, bring back the previous ones; after a link
    that carried settings, make every widget it names take the link's value."""
    previous = st.session_state.get(_PAGE)
    st.session_state[_PAGE] = page
    carried = set(settings.address()) - set(INTERFACE_KEYS)
    st.session_state[_BY_MENU] = previous is not None and previous != page and not carried
    if previous is not None:
        follow_link()
        if previous != page:
            _bring_back()
    remember()        # this run may be stopped before its end: what it opened with is kept already


def arrived_by_menu() -> bool:
    """Whether this run opened its page from another page of the session through the menu, bringing the
    settings the user had there (a link that carries settings of its own is followed exactly)."""
    return bool(st.session_state.get(_BY_MENU))


def _bring_back() -> None:
    """After a switch that carried no settings (the sidebar menu), put back the remembered ones."""
    now = settings.address()
    carried = set(now) - set(INTERFACE_KEYS)
    if carried:
        return      # a link with its own settings: honour it exactly
    missing = {key: value for key, value in st.session_state.get(_MEMORY, {}).items() if key not in now}
    if missing:
        settings.sync_url(**missing)


def follow_link() -> None:
    """A setting the address changed since the last run came from a link or Back (widgets write the address
    themselves, at the end of a run). A widget keeps its value in session state, which wins over the
    address, so a link to the page on screen would set only what no widget holds: "Show me" sampling
    with top-p left the strategy on greedy. Give those widgets the link's value, checked and held in range
    by `ui.settings` as on every other way in; a value nothing can use leaves the widget to the address
    (which `ui.settings.read` then refuses, with its note)."""
    memory = st.session_state.get(_MEMORY)
    if memory is None:
        return
    for key, value in settings.address().items():
        widget = settings.widget_key(key)
        if key in INTERFACE_KEYS or memory.get(key) == value or widget not in st.session_state:
            continue
        # a key not in the table is read by its widget's current type, with no range
        setting = settings.TABLE.get(key) or settings.Setting(st.session_state[widget])
        try:
            st.session_state[widget] = settings.parse(key, value, setting)
        except (settings.Unusable, TypeError, ValueError):
            st.session_state.pop(widget, None)
        else:
            settings.note_changes(key, value, st.session_state[widget], setting)


def remember() -> None:
    """Record the query string of this run (call when the page has finished, even if it stopped)."""
    st.session_state[_MEMORY] = settings.address()
