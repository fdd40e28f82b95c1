"""The link to this exact view: the page's address with every setting that is not at its default, offered in a
box with a copy button. Short enough to read aloud and to fit its box on a projector."""
from __future__ import annotations

import streamlit as st

from ui.i18n import t
from ui.settings import TABLE, URL_PROMPT_LIMIT, url_bytes


SHARED_ALWAYS = {"max_new_tokens", "rerank_lp", "sd_layer"}    # defaults that differ by page, trace or model
SAMPLER_TEXTS = {"dry_sequence_breakers", "samplers"}   # texts with one default everywhere: left out at it


def _worth_sharing(key: str, text: str) -> bool:
    """Whether a setting belongs in a shared link: not one at its table default (the page opening the link
    takes that default anyway), so the link stays short enough to read and to fit its box on a projector.
    Texts always go, and the settings whose default depends on the page or the language (SHARED_ALWAYS)."""
    setting = TABLE.get(key)
    if key in SAMPLER_TEXTS:
        return text != setting.default
    if setting is None or key in SHARED_ALWAYS or setting.choices is None and setting.kind is str:
        return key != "present" or text != "0"
    default = setting.default
    plain = ("1" if default else "0") if isinstance(default, bool) else (
        ",".join(default) if isinstance(default, list) else str(default))
    return text != plain


def share_link() -> str:
    """The address of this page with every setting that is not at its default in its query string."""
    from urllib.parse import urlencode, urlsplit, urlunsplit

    try:
        base = st.context.url or ""
    except Exception:   # noqa: BLE001 - no browser (tests, bare mode)
        base = ""
    parts = urlsplit(base)
    query = urlencode({key: text for key, text in st.query_params.to_dict().items() if _worth_sharing(key, text)})
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, "")) if base else "?" + query


def copy_link_control() -> None:
    """A "copy link" box in the sidebar: the code block has Streamlit's copy button."""
    # opening it runs the page again: the link is built then, with what a part of the page changed on its own
    # (Step by step's Next moves the step without running the sidebar)
    # what the link holds is the button's help: the box holds the link alone, so that it opens whole under the
    # sidebar's page list on a 1280x720 screen
    with st.sidebar.popover(t("common.copy_link"), icon="🔗", width="stretch", key="copy_link", on_change="rerun",
                            help=t("common.copy_link_help")):
        prompt = st.session_state.get("prompt") or ""
        if url_bytes(prompt) > URL_PROMPT_LIMIT:
            st.warning(t("common.copy_link_no_prompt", n=f"{url_bytes(prompt):,}", limit=f"{URL_PROMPT_LIMIT:,}"))
        st.code(share_link(), language=None, wrap_lines=True)
