"""What every page opens with, in one place: its title and introduction row, the shared sidebar, a slot for
the main figure, a trace upload, and the shared model. The pages then differ only in what they show."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from engine import LoadedModel, Trace

from .export import trace_upload
from .i18n import t
from .present import stage, stage_row
from .reconnect import reconnect_note
from .shared_model import get_lm
from .sidebar import DEFAULT_NEW_TOKENS, SharedSettings, needs_weights, shared_sidebar


@dataclass
class Opened:
    row: dict                          # stage_row's containers: "settings", and "upload" when asked for
    settings: SharedSettings
    slot: object = None                # where the main figure goes (presentation mode), or None
    uploaded: Trace | None = None


def open_page(section: str, *, new_tokens: int = DEFAULT_NEW_TOKENS, copy_link: bool = False, slot: bool = True,
              weights: bool = False, upload: str | None = None, refuse=None) -> Opened:
    """The page's title and introduction (texts `section.title`, `section.intro`), then the sidebar.

    new_tokens: the length the page opens with (pages that run several decodes open short).
    slot: make the main figure's slot here, under the introduction (a page that places it lower makes its own).
    weights: the page needs the model's weights: with a served model chosen, say so and stop, before the upload.
    upload: the key of a trace upload in the introduction row; refuse: trace -> a message for a trace the page
    cannot show (see ui.export.trace_upload)."""
    st.title(t(f"{section}.title"))
    reconnect_note()            # a tab that came back to a process that did not have its session
    row = stage_row(t(f"{section}.intro"), upload=t("export.open_trace") if upload else None,
                    settings=t("present.settings"))
    where = stage() if slot else None
    settings = shared_sidebar(new_tokens, copy_link=copy_link)
    if weights:
        needs_weights()
    uploaded = None
    if upload:
        with row["upload"]:
            uploaded = trace_upload(upload, refuse=refuse)
    return Opened(row, settings, where, uploaded)


def shared_model(settings: SharedSettings) -> LoadedModel:
    """The model the sidebar names, loaded once per server (ui.shared_model.get_lm); the page stops, after the
    message get_lm showed, when it cannot be loaded."""
    needs_weights()
    lm = get_lm(settings.model)
    if lm is None:
        st.stop()
    return lm
