"""The address (query string) as this run has left it so far: read by the language switch and by settings.

A run gathers its address writes and sends them together at its end (ui/settings.py: one_address_write), so a
value read mid-run must look in that gathering first. It lives here, below both ui/i18n.py and ui/settings.py,
so neither has to import the other to read the address.
"""
from __future__ import annotations

import streamlit as st

GATHERED = "_address_gathered"    # a whole run's address writes, sent together at its end (None: a removal)


def address_value(key: str, default: str | None = None) -> str | None:
    """The address's value for `key` as this run has left it so far (its gathered writes included)."""
    gathered = st.session_state.get(GATHERED)
    if gathered is not None and key in gathered:
        return default if gathered[key] is None else gathered[key]
    return st.query_params.get(key, default)
