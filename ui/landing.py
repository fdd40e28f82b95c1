"""The landing at the root address: what DecodeScope is, where to start, and what each page shows.

A first visit used to open straight into Step by step, under the tour box, with nothing that said
what the app was for. Every link here carries the address's settings (language, presentation mode).
"""
from __future__ import annotations

import streamlit as st

from ui.i18n import t
from ui.settings import address, sync_url
from ui.sidebar import language_control
from ui.url_memory import INTERFACE_KEYS


def landing(pages: list) -> None:
    """The root page. pages: [(st.Page, page stem)] in the menu's order; the first is where to start."""
    with st.sidebar:                      # the language choice, for a reader who needs the other one
        sync_url(lang=language_control())
    st.title(t("common.app_title"))
    st.markdown(f"**{t('common.tagline')}**")
    st.markdown(t("landing.what"))
    params = {k: v for k, v in address().items() if k in INTERFACE_KEYS}   # each page opens as usual
    first, first_stem = pages[0]
    st.page_link(first, label=t("landing.start", page=t(f"nav.{first_stem}")), icon="👉", query_params=params,
                 help=t("landing.start_help"))
    st.subheader(t("landing.pages_heading"))
    for page, stem in pages:
        st.page_link(page, label=t("landing.item", page=t(f"nav.{stem}"), what=t(f"landing.{stem}")), icon=page.icon,
                     query_params=params)
