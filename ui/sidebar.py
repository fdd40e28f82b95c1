"""The sidebar every page shares: language, model (bundled, another, or one on a server), prompt, chat, seed
and length, all kept in the URL; the loaded model's facts; the link to this exact view (ui/share_link.py)."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from engine import DEFAULT_MODEL
from engine.model import BUNDLED, DTYPES, bundled_named
from engine.served import Server, ServedError, check_url
from engine.served.numbers import LEARNT, NUMBERS, UNKNOWN
from figures.labels import for_markdown
from ui.demo import landing_model, landing_prompt
from ui.engine_words import engine_text
from ui.i18n import LANGUAGES, language, t
from ui.limits import prompt_within_limit
from ui.settings import bounds, linkable, read, sync_url, url_value
from ui.share_link import copy_link_control
from ui.shared_model import SERVED, model_key, offered_models, offers_served, room_server, without_chat_template


@dataclass(frozen=True)
class SharedSettings:
    model: str
    prompt: str
    chat: bool
    seed: int
    max_new_tokens: int
    lang: str


DEFAULT_NEW_TOKENS = 24
LIGHT_NEW_TOKENS = 12       # pages that run several decodes open with this length: an answer in seconds on 2 cores


def shared_sidebar(default_new_tokens: int = DEFAULT_NEW_TOKENS, copy_link: bool = False) -> SharedSettings:
    """The sidebar every page shares: language, model, prompt, chat switch, seed, length.

    default_new_tokens: the length a page opens with when neither the session nor the URL has one.
    copy_link: put the "copy link" box first, where it opens downwards with the sidebar's room under it (at
    the bottom it ran off a laptop's screen). The address it shows is the one the last run left, which is
    this view's: opening the box runs the page again."""
    st.session_state["_errors_shown"] = set()        # a new run: messages may be shown again (keep_or_stop)
    with st.sidebar:
        if copy_link:
            copy_link_control()
        language_control()
        model, placement = model_controls()
        prompt = st.text_area(t("common.prompt"), value=read("prompt", landing_prompt()), key="prompt", height=90)
        chat = chat_control(model)
        seed = st.number_input(t("common.seed"), *bounds("seed"), step=1, value=read("seed"), key="seed")
        max_new = st.number_input(t("common.max_new_tokens"), *bounds("max_new_tokens"), step=1,
                                  value=read("max_new_tokens", default_new_tokens), key="max_new_tokens")
    prompt = prompt_within_limit(prompt, model)
    settings = SharedSettings(model=model, prompt=prompt, chat=chat, seed=int(seed), max_new_tokens=int(max_new),
                              lang=language())
    # the sidebar's settings in one call; a pasted book does not belong in an address bar or a share link
    sync_url(model=model, chat=chat, seed=settings.seed, max_new_tokens=settings.max_new_tokens, lang=settings.lang,
             prompt=linkable(prompt), **placement)
    return settings


def chat_control(model: str) -> bool:
    """The chat switch; off, held off and saying why, for a loaded model that has no chat template (a base model
    such as Gemma 3 270M): the prompt then goes to the model as written."""
    no_template = without_chat_template(model)
    if no_template and st.session_state.get("chat"):
        st.session_state["chat"] = False         # before the switch is drawn in this run
    chat = st.toggle(t("common.chat"), value=read("chat"), key="chat", help=t("common.chat_help"),
                     disabled=no_template)
    if no_template:
        st.caption(t("common.chat_no_template", model=for_markdown(model_key(model))))
    return chat and not no_template


def language_control() -> str:
    """The interface language, first in the sidebar of every page (the landing has nothing else there)."""
    return st.selectbox(t("common.language"), list(LANGUAGES), format_func=LANGUAGES.get, key="lang",
                        index=list(LANGUAGES).index(language()))


MODEL_CHOICES = (*BUNDLED, "other", SERVED)   # the bundled models by their short names, any other, a server's


def _choose_model() -> None:
    """The choice box's callback: a bundled model fills the Model box; "another" empties it for typing;
    a served model leaves the Model box as it is (it is hidden while a server is chosen)."""
    choice = st.session_state["model_choice"]
    st.session_state["_model_other"] = choice == "other"
    st.session_state["_model_served"] = choice == SERVED
    if choice == SERVED:
        return
    if choice != "other":
        st.session_state["model"] = choice
    elif bundled_named(st.session_state.get("model", "")) is not None:
        st.session_state["model"] = ""


def _choice_of(model: str) -> str:
    served = st.session_state.get("_model_served")
    if served is None:                # a new session: a link's `server` chooses a served model (not connected),
        # as does a room whose only model is its own model server
        served = bool(st.query_params.get("server")) or (room_server() is not None and offered_models() == ())
        st.session_state["_model_served"] = served
    if served and offers_served():
        return SERVED
    bundled = bundled_named(model)
    if st.session_state.get("_model_other") and not (model or "").strip():
        return "other"
    return bundled.key if bundled is not None else "other"


def model_controls() -> tuple:
    """The model choice (each bundled model named for what it is, another, or a served model), the Model
    box, and the device and precision it runs in; or, for a served model, the server's address and a
    Connect button. Returns what the Model box holds, and the device and precision chosen (none for a
    served model) for the caller to write into the address with the other settings."""
    model_now = url_value("model", landing_model())
    choices = MODEL_CHOICES if offers_served() else tuple(c for c in MODEL_CHOICES if c != SERVED)
    st.session_state["model_choice"] = _choice_of(model_now)
    labels = {c: t(f"common.model_choice_{c.replace('-', '_')}") for c in choices}   # in this run's language
    st.selectbox(t("common.model_choice"), choices, key="model_choice", on_change=_choose_model,
                 format_func=labels.get)
    if st.session_state["model_choice"] == SERVED:
        server_controls()
        return model_now, {}
    if st.query_params.get("server") and not offers_served():
        st.caption(t("served.not_offered"))
    sync_url(server=None, served_model=None)      # a copied link names a server only while one is chosen
    model = st.text_input(t("common.model"), value=model_now, key="model",
                          placeholder=_empty_box_means(), help=t("common.model_help"))
    devices = ["auto", "cpu"] + [d for d, ok in (("cuda", _cuda()), ("mps", _mps())) if ok]
    with st.expander(t("common.placement")):
        device = st.selectbox(t("common.device"), devices, key="device", help=t("common.device_help"),
                              index=(devices.index(url_value("device", "auto"))
                                     if url_value("device", "auto") in devices else 0))
        dtype = st.selectbox(t("common.dtype"), DTYPES, key="dtype", help=t("common.dtype_help"),
                             index=(DTYPES.index(url_value("dtype", "auto"))
                                    if url_value("dtype", "auto") in DTYPES else 0))
    return model, {"device": device, "dtype": dtype}


def _empty_box_means() -> str:
    """The Model box's placeholder: the model an empty box loads, named in the reader's language."""
    name = model_key("")
    return t("common.model_placeholder") if name == DEFAULT_MODEL else name


CONNECT_TIMEOUT_S = 15       # the model list is a small answer; a silent address is given up on sooner
DECODE_TIMEOUT_S = 120       # one completion of up to 1,024 tokens, or one beam step


def server_controls() -> None:
    """The server's address and model name (a link may fill both in) and Connect. No request leaves
    before the user presses Connect in this session: a link's author is not the user. The address
    is always shown as typed, never as Markdown."""
    address = st.text_input(t("served.address"), value=url_value("server", room_server() or ""), key="server",
                            placeholder="http://127.0.0.1:8000", help=t("served.address_help"))
    name = st.text_input(t("served.model_name"), value=url_value("served_model", ""), key="served_model",
                         help=t("served.model_name_help"))
    # an empty value is left out of the address (the URL memory skips empty ones)
    sync_url(server=address or None, served_model=name or None)
    if st.button(t("served.connect"), key="served_connect", icon="🔌", help=t("served.connect_help")) \
            or _room_connects(address):
        try:
            server = Server.connect(address, name.strip() or None, timeout=CONNECT_TIMEOUT_S)
        except ServedError as exc:     # one line; the connection (and the results) from before stay
            st.error(t("served.connect_failed", error=engine_text(exc)))
        else:
            server.timeout = DECODE_TIMEOUT_S
            st.session_state["_server"] = server
    server = st.session_state.get("_server")
    if server is None:
        st.caption(t("served.not_connected"))
        return
    st.caption(for_markdown(t("served.connected", model=server.model, kind=server.kind, url=server.url)))
    if not _same_address(address, server.url):
        st.caption(t("served.address_changed"))


def _room_connects(address: str) -> bool:
    """Connect without a click, once per session, when the address is the room's own model server (a tab that
    came back to another app process of the room finds its model again). Any other address waits for Connect."""
    room = room_server()
    if room is None or st.session_state.get("_server") is not None or st.session_state.get("_room_connect_tried"):
        return False
    try:
        same = check_url(room) == check_url(address)
    except ServedError:
        return False
    st.session_state["_room_connect_tried"] = same
    return same


def _same_address(address: str, url: str) -> bool:
    try:
        return check_url(address) == url
    except ServedError:
        return False


def served_selected() -> bool:
    """Whether the sidebar's model choice is a served model (connected or not)."""
    return st.session_state.get("model_choice") == SERVED and offers_served()


def connected_server() -> Server | None:
    """The server this user connected to in this session, while a served model is chosen; else None."""
    return st.session_state.get("_server") if served_selected() else None


def needs_weights() -> None:
    """On a page that needs the model's weights: with a served model chosen, say so in one line and stop."""
    if served_selected():
        st.info(t("served.needs_weights"))
        st.stop()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _mps() -> bool:
    import torch

    return torch.backends.mps.is_available()

# ---- sidebar extras: model facts and a link to this exact view ---------------------
def _human(n) -> str:
    if not isinstance(n, int | float) or isinstance(n, bool):
        return "?"
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}".replace(".0", "")
    return str(int(n))


def _count(n) -> str:
    """A whole number with thousands separators, or "?" for anything else (a fact missing from a file)."""
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else "?"


def model_facts_panel(facts) -> None:
    """Name, parameters, vocabulary, layers and KV bytes per token of the loaded model (ModelFacts or dict).

    The facts of an uploaded trace come from the file: the name is shown as literal text, never
    as Markdown (an image there would make every viewer's browser fetch it)."""
    get = (lambda k: facts.get(k)) if isinstance(facts, dict) else (lambda k: getattr(facts, k, None))
    served = get("served")
    if isinstance(served, dict):         # a model on a server: what the server said, as literal text
        with st.sidebar.expander(t("common.model_facts"), expanded=False):
            numbers = served.get("logprobs") if served.get("logprobs") in NUMBERS else UNKNOWN
            how = served.get("logprobs_from") if served.get("logprobs_from") in LEARNT else UNKNOWN
            st.markdown(t("served.facts", model=for_markdown(str(get("name") or "?")),
                          kind=for_markdown(str(served.get("server") or "?")),
                          url=for_markdown(str(served.get("url") or "?")), n=_count(served.get("top_n")),
                          numbers=t(f"served.numbers_{numbers}"), how=t(f"served.how_{how}")))
        return
    kv = get("kv_bytes_per_token")
    with st.sidebar.expander(t("common.model_facts"), expanded=False):
        st.markdown(t("common.model_facts_body", name=for_markdown(str(get("name") or "?")),
                      device=for_markdown(str(get("device") or "?")), dtype=for_markdown(str(get("dtype") or "?")),
                      parameters=_human(get("parameters")), vocab=_count(get("vocab_size")),
                      layers=_count(get("layers")), kv=_count(kv),
                      kv_k=f"{kv / 1024:.1f}" if isinstance(kv, int) and not isinstance(kv, bool) else "?"))
