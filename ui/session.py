"""The one model shared by all sessions, and the shared sidebar settings kept in the URL.

The model is loaded once per process and never mutated, so every browser session can
use it at once; each decode draws from its own seeded torch.Generator. Per-user
results live in st.session_state.
"""
from __future__ import annotations

import gc
import os
import threading
from dataclasses import dataclass
from urllib.parse import quote_plus

import streamlit as st

from engine import DEFAULT_MODEL, ConfigError, DecodeScopeError, ModelLoadError, load_model
from engine.config import MAX_NEW_TOKENS
from engine.model import BUNDLED, DTYPES, LoadedModel, bundled_named
from engine.served import Server, ServedError, check_url
from engine.served.numbers import LEARNT, NUMBERS, UNKNOWN
from engine.tokens import unpaired_surrogate
from figures.labels import for_markdown
from ui.i18n import LANGUAGES, language, t
from ui.settings import TABLE, Setting, bounds, hold, read
from engine.stepper import OPENINGS

_load_lock = threading.Lock()


@st.cache_resource(show_spinner=False)
def _models() -> dict:
    """name -> LoadedModel, one dict per server process."""
    return {}


SERVED = "served"      # the model choice, and the DECODESCOPE_MODELS word, for a model on a server


def _pinned() -> list | None:
    raw = os.environ.get("DECODESCOPE_MODELS", "").strip()
    return [n.strip() for n in raw.split(",") if n.strip()] if raw else None


def offered_models() -> tuple | None:
    """The models this server offers, from DECODESCOPE_MODELS (comma-separated; `bundled` is the
    bundled model, `served` allows models on a vLLM or llama.cpp server), or None when any name may
    be loaded. A shared deployment pins its models so that nobody, and no uploaded file, makes the
    server fetch or load another. A setting that names only `served` offers no local model: ()."""
    pinned = _pinned()
    if pinned is None:
        return None
    names = [_bundled_or(n) for n in pinned if n.lower() != SERVED]
    return tuple(dict.fromkeys(names))


def offers_served() -> bool:
    """Whether users may connect to a model on a server of their choice: always when DECODESCOPE_MODELS
    is unset, else only when it names `served` (a pinned deployment makes no requests it did not name)."""
    pinned = _pinned()
    return pinned is None or SERVED in (n.lower() for n in pinned)


def _bundled_or(name: str) -> str:
    """A bundled model's display name for any of its names ('bundled', 'gemma3-270m', ...), else `name`."""
    bundled = bundled_named(name) if name else None
    return bundled.name if bundled is not None else name


def model_key(name: str) -> str:
    """The name a model is loaded and cached under: an empty box means the server's first model."""
    name = (name or "").strip()
    if name == "":
        offered = offered_models()
        return offered[0] if offered else DEFAULT_MODEL
    return _bundled_or(name)


DEFAULT_PROMPT = "The capital of France is"
ZH_DEMO_PROMPT = "中国的首都是"
# Each demo prompt's teacher-forcing reference, in its own language, written by hand so that it parts from
# what the bundled model writes greedily: a reference the model reproduces shows no exposure bias at all.
DEMO_REFERENCES = {
    DEFAULT_PROMPT: (" Paris. It is the largest city in the country and sits on the river Seine. Visitors come "
                     "for the Eiffel Tower, the Louvre and the food."),
    ZH_DEMO_PROMPT: "北京。这座古城已有三千多年的历史，秋天是游览故宫和长城最好的季节。",
}


def demo_language_settings() -> dict:
    """What a demo link changes for the reader's language: with the Chinese interface, a Chinese
    prompt on the bundled model that writes Chinese (SmolLM2 answers Chinese with noise), where
    this server offers it."""
    from engine.model import GEMMA3

    if language() == "zh" and offers(GEMMA3.key):
        return {"prompt": ZH_DEMO_PROMPT, "model": GEMMA3.key}
    return {}


def landing_prompt() -> str:
    """The prompt a page opens with when neither the session nor the link names one: the demo prompt
    of the reader's language (a Chinese reader is not greeted with an English sentence)."""
    return demo_language_settings().get("prompt", DEFAULT_PROMPT)


def landing_model() -> str:
    """What the Model box holds when neither the session nor the link names a model: empty (the bundled
    SmolLM2), or for a Chinese reader the bundled model that writes Chinese, where this server offers it."""
    return demo_language_settings().get("model", "")


def demo_reference(prompt: str) -> str:
    """The teacher-forcing reference a page opens with: the prompt's own when it is a demo prompt, else the
    one written for the landing prompt (the page then asks before scoring it after another prompt)."""
    return DEMO_REFERENCES.get(prompt) or DEMO_REFERENCES[landing_prompt()]


def offers(name: str) -> bool:
    """Whether this server may load the model called `name`."""
    offered = offered_models()
    return offered is None or model_key(name) in offered


def _placement(key: str) -> tuple:
    """(model name, device, dtype) from a cache key 'name [device, dtype]'."""
    if key.endswith("]") and " [" in key:
        name, rest = key[:-1].rsplit(" [", 1)
        device, _, dtype = rest.partition(", ")
        return name, device, dtype
    return key, "auto", "auto"


def _load_shared(key: str):
    """The shared model called `key`, loading it (with a progress bar) on first use."""
    models = _models()
    if key in models:
        return models[key]
    name, device, dtype = _placement(key)
    offered = offered_models()
    if offered is not None and name not in offered:
        raise ModelLoadError(t("common.model_not_offered", name=name, models=", ".join(offered)))
    early = _early.get(key)
    if early is not None and not early.done.is_set():        # the server is still loading it: show how far
        bar = st.progress(0.0, text=for_markdown(t("common.loading_model", name=key)))
        while not early.done.wait(0.25):
            bar.progress(min(max(early.fraction, 0.0), 1.0), text=for_markdown(early.message or key))
        bar.empty()
    with _load_lock:
        if key not in models:
            bar = st.progress(0.0, text=for_markdown(t("common.loading_model", name=key)))
            try:
                lm = load_model(None if name == DEFAULT_MODEL else name, device=device, dtype=dtype,
                                progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), text=for_markdown(msg)))
            finally:
                bar.empty()
            for other in [k for k in models if k != DEFAULT_MODEL]:
                OPENINGS.forget(models.pop(other))   # keep the default plus at most one user model in memory
            models[key] = lm
            # The libraries and the model live as long as the server. Streamlit collects garbage in full
            # after every run, which walked their ~450,000 objects (a quarter second on 2 cores, on every
            # click, before the browser got the rest of the page); frozen, it looks only at newer objects.
            gc.freeze()
            if lm.cache_rebuilt:
                st.warning(for_markdown(t("common.cache_rebuilt", reason=lm.cache_rebuilt)))
    return models[key]


class _EarlyLoad:
    """How far the load that started with the server has come (read by the first visits while it runs)."""

    def __init__(self):
        self.fraction, self.message, self.done = 0.0, "", threading.Event()

    def progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message


_early: dict = {}


def load_early() -> threading.Thread | None:
    """Start loading the server's first model in a background thread as the server starts, so the first
    visit waits only for what is left (with a progress bar), not for the whole load. A visit that asks for
    it meanwhile waits for this load rather than starting a second one. None when the server offers no
    local model."""
    key = model_key("")
    offered = offered_models()
    if offered is not None and key not in offered:
        return None
    early = _early[key] = _EarlyLoad()

    def run() -> None:
        try:
            with _load_lock:
                models = _models()
                if key not in models:
                    models[key] = load_model(None if key == DEFAULT_MODEL else key, progress=early.progress)
                    gc.freeze()                  # as _load_shared does: later collections skip the libraries
        except DecodeScopeError:
            pass                                 # the first visit loads it again and names the problem
        finally:
            early.done.set()

    thread = threading.Thread(target=run, name="load-early", daemon=True)
    thread.start()
    return thread


def get_lm(name: str = ""):
    """The model this user chose, on the device and in the precision chosen in the sidebar, or None
    after a clear message.

    A name that cannot be loaded (or that this server does not offer) is named in the message,
    and the model this user had before is used again, so the results on screen stay."""
    key = model_key(name)
    placement = (st.session_state.get("device") or "auto", st.session_state.get("dtype") or "auto")
    if placement != ("auto", "auto"):
        key = f"{key} [{placement[0]}, {placement[1]}]"
    try:
        lm = _load_shared(key)
    except DecodeScopeError as exc:
        previous = st.session_state.get("_last_model")
        error = DecodeScopeError(t("common.model_error", error=str(exc)))
        if previous is None or previous == key:
            show_error(str(error))
            return None
        keep_or_stop(error, have_previous=True)
        try:
            return _load_shared(previous)
        except DecodeScopeError:
            return None
    st.session_state["_last_model"] = key
    return lm


def draft_model(name: str):
    """The second model of a speculative draft, shared like the main one; raises DecodeScopeError (a model this
    server does not offer, or one that cannot be loaded) for the page to show."""
    return _load_shared(model_key(name))


def show_error(message: str, box=None) -> None:
    """An error box that shows `message` literally: a model name, prompt or file name typed by
    anyone may look like a link or an image in Markdown, and must stay text."""
    (box or st).error(for_markdown(message))


# ---- settings kept in the URL --------------------------------------------------
URL_PROMPT_LIMIT = 4000     # bytes a prompt may take in the URL, percent-encoded as the address carries it
PROMPT_LIMIT_BYTES = 8000   # UTF-8 bytes of prompt this server decodes: the first forward pass grows with the
                            # prompt (30 KB of English, 5,700 tokens, fits the bundled model's 8,192-token context
                            # and took 95 s on a busy 2-core machine), so a shared server stops well before that
PROMPT_LIMIT_TOKENS = 2048  # and tokens, once the model is loaded: 6,000 bytes of emoji are about 4,500 tokens


def url_bytes(text: str) -> int:
    """Bytes `text` takes in an address: an emoji is 4 UTF-8 bytes, 12 once percent-encoded."""
    return len(quote_plus(text, errors="surrogatepass"))


def url_value(key: str, default, kind=str):
    """A setting from session state, else the URL, else the default, checked by `ui.settings` (a key not in its
    table is read by the same rules, with no range)."""
    if key in TABLE:
        return read(key, default)
    return read(key, setting=Setting(kind(default) if kind is not str else str(default)))


def url_number(key: str, default, low, high, kind=None):
    """A numeric setting held inside [low, high]; keys in `ui.settings.TABLE` take the table's range."""
    kind = kind or type(default)
    if key not in TABLE:
        return read(key, setting=Setting(kind(default), low, high))
    # the table's check, then the bounds this call gives (a range that depends on the run, such as the layers of
    # the model loaded now); a widget's kept value outside them is held too, or the widget would refuse it
    value = min(max(read(key, default), kind(low)), kind(high))
    if key in st.session_state and st.session_state[key] != value:
        hold(key, value)
    return value


def sync_url(**values) -> None:
    """Write settings into the URL so a copied address reproduces the view."""
    for key, value in values.items():
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        if st.query_params.get(key) != text:
            st.query_params[key] = text


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
        model = model_controls()
        prompt = st.text_area(t("common.prompt"), value=read("prompt", landing_prompt()), key="prompt", height=90)
        chat = st.toggle(t("common.chat"), value=read("chat"), key="chat", help=t("common.chat_help"))
        seed = st.number_input(t("common.seed"), *bounds("seed"), step=1, value=read("seed"), key="seed")
        max_new = st.number_input(t("common.max_new_tokens"), *bounds("max_new_tokens"), step=1,
                                  value=read("max_new_tokens", default_new_tokens), key="max_new_tokens")
    prompt = _prompt_within_limit(prompt, model)
    settings = SharedSettings(model=model, prompt=prompt, chat=chat, seed=int(seed), max_new_tokens=int(max_new),
                              lang=language())
    sync_url(model=model, chat=chat, seed=settings.seed, max_new_tokens=settings.max_new_tokens, lang=settings.lang)
    sync_long_text("prompt", prompt)   # a pasted book does not belong in an address bar or a share link
    return settings


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
    if served is None:                # a new session: a link's `server` chooses a served model (not connected)
        served = st.session_state["_model_served"] = bool(st.query_params.get("server"))
    if served and offers_served():
        return SERVED
    bundled = bundled_named(model)
    if st.session_state.get("_model_other") and not (model or "").strip():
        return "other"
    return bundled.key if bundled is not None else "other"


def model_controls() -> str:
    """The model choice (each bundled model named for what it is, another, or a served model), the Model
    box, and the device and precision it runs in; or, for a served model, the server's address and a
    Connect button. Returns what the Model box holds."""
    model_now = url_value("model", landing_model())
    choices = MODEL_CHOICES if offers_served() else tuple(c for c in MODEL_CHOICES if c != SERVED)
    st.session_state["model_choice"] = _choice_of(model_now)
    labels = {c: t(f"common.model_choice_{c.replace('-', '_')}") for c in choices}   # in this run's language
    st.selectbox(t("common.model_choice"), choices, key="model_choice", on_change=_choose_model,
                 format_func=labels.get)
    if st.session_state["model_choice"] == SERVED:
        server_controls()
        return model_now
    if st.query_params.get("server") and not offers_served():
        st.caption(t("served.not_offered"))
    for key in ("server", "served_model"):      # a copied link names a server only while one is chosen
        st.query_params.pop(key, None)
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
    sync_url(device=device, dtype=dtype)
    return model


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
    address = st.text_input(t("served.address"), value=url_value("server", ""), key="server",
                            placeholder="http://127.0.0.1:8000", help=t("served.address_help"))
    name = st.text_input(t("served.model_name"), value=url_value("served_model", ""), key="served_model",
                         help=t("served.model_name_help"))
    for key, value in (("server", address), ("served_model", name)):
        if value:
            sync_url(**{key: value})
        else:              # an empty value is left out of the address (the URL memory skips empty ones)
            st.query_params.pop(key, None)
    if st.button(t("served.connect"), key="served_connect", icon="🔌", help=t("served.connect_help")):
        try:
            server = Server.connect(address, name.strip() or None, timeout=CONNECT_TIMEOUT_S)
        except ServedError as exc:     # one line; the connection (and the results) from before stay
            show_error(t("served.connect_failed", error=str(exc)))
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


def prompt_problem(prompt: str, lm: LoadedModel | None = None, tokens: int | None = None) -> str | None:
    """Why this server will not decode `prompt` (too many bytes, or tokens once a model can count them), else
    None. tokens: the count when it is known already (a recorded trace's prompt ids)."""
    size = len(prompt.encode("utf-8", errors="surrogatepass"))
    if size > PROMPT_LIMIT_BYTES:
        return t("common.prompt_too_big", n=f"{size:,}", limit=f"{PROMPT_LIMIT_BYTES:,}")
    if tokens is None:
        tokens = 0
        if lm is not None and unpaired_surrogate(prompt) is None:      # (the engine names a lone surrogate)
            tokens = len(lm.tokenizer(prompt)["input_ids"])
    if tokens > PROMPT_LIMIT_TOKENS:
        return t("common.prompt_too_many_tokens", n=f"{tokens:,}", limit=f"{PROMPT_LIMIT_TOKENS:,}")
    return None


def _prompt_within_limit(prompt: str, model: str) -> str:
    """The prompt, or the last one within the limits when this one is over them: refused here, before
    any forward pass, and the results of the last good prompt stay on screen. Bytes are counted
    first; tokens too when the model is already loaded (tokenizing takes milliseconds)."""
    problem = prompt_problem(prompt, _models().get(model_key(model)))
    if problem is None:
        st.session_state["_last_good_prompt"] = prompt
        return prompt
    previous = st.session_state.get("_last_good_prompt")
    keep_or_stop(ConfigError("prompt", problem), have_previous=previous is not None)
    return previous


def reference_within_limit(reference: str, lm: LoadedModel | None = None, url_key: str = "tf_reference") -> str | None:
    """The teacher-forcing reference, or the last one within the limits when this one is over them.

    Scoring a reference is one forward pass over prompt + reference, and the free run beside it decodes
    as many tokens as the reference has: so a reference gets the prompt's byte limit, and at most the
    tokens one decode may make (MAX_NEW_TOKENS), counted with the loaded model's tokenizer when there
    is one. Refused here, before any forward pass, with the results of the last good reference kept;
    `url_key`, the reference's place in the URL, then holds no refused text."""
    size = len(reference.encode("utf-8", errors="surrogatepass"))
    problem = None
    if size > PROMPT_LIMIT_BYTES:
        problem = t("teacher.reference_too_big", n=f"{size:,}", limit=f"{PROMPT_LIMIT_BYTES:,}")
    elif lm is not None and unpaired_surrogate(reference) is None:      # (the engine names a lone surrogate)
        tokens = len(lm.tokenizer(reference, add_special_tokens=False)["input_ids"])
        if tokens > MAX_NEW_TOKENS:
            problem = t("teacher.reference_too_many_tokens", n=f"{tokens:,}", limit=f"{MAX_NEW_TOKENS:,}")
    if problem is None:
        st.session_state["_last_good_reference"] = reference
        return reference
    previous = st.session_state.get("_last_good_reference")
    st.query_params.pop(url_key, None)        # a refused text is no link to share (the page puts back a kept one)
    keep_or_stop(ConfigError("reference", problem), have_previous=previous is not None)
    return previous


def sync_long_text(key: str, text: str) -> None:
    """Write a free text (prompt, reference) into the URL, or leave it out when it would make the address
    too long for a link (URL_PROMPT_LIMIT bytes, percent-encoded)."""
    if url_bytes(text) <= URL_PROMPT_LIMIT:
        sync_url(**{key: text})
    else:
        st.query_params.pop(key, None)


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


SHARED_ALWAYS = {"max_new_tokens", "rerank_lp", "sd_layer"}    # defaults that differ by page, trace or model


def _worth_sharing(key: str, text: str) -> bool:
    """Whether a setting belongs in a shared link: not one at its table default (the page opening the link
    takes that default anyway), so the link stays short enough to read and to fit its box on a projector.
    Texts always go, and the settings whose default depends on the page or the language (SHARED_ALWAYS)."""
    setting = TABLE.get(key)
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
    with st.sidebar.popover(t("common.copy_link"), icon="🔗", width="stretch", key="copy_link", on_change="rerun"):
        st.caption(t("common.copy_link_help"))
        prompt = st.session_state.get("prompt") or ""
        if url_bytes(prompt) > URL_PROMPT_LIMIT:
            st.warning(t("common.copy_link_no_prompt", n=f"{url_bytes(prompt):,}", limit=f"{URL_PROMPT_LIMIT:,}"))
        st.code(share_link(), language=None, wrap_lines=True)


def keep_or_stop(exc: Exception, have_previous: bool) -> None:
    """Say what was wrong; keep the results already on screen when there are some, else stop the page.

    A bad prompt or setting must not wipe out the decode a user was looking at. Each message
    is shown once per run, however many computations it stopped."""
    shown = st.session_state.setdefault("_errors_shown", set())      # emptied by shared_sidebar each run
    if str(exc) not in shown:
        show_error(str(exc))
        shown.add(str(exc))
    if not have_previous:
        st.stop()
    if "kept" not in shown:
        st.caption(t("common.kept_previous"))
        shown.add("kept")


def cached(name: str, identity: tuple, compute):
    """Per-user result in session state, recomputed only when its inputs change.

    When the new inputs are bad (a DecodeScopeError), the message is shown and the previous
    result is returned, so what was on screen stays; with no previous result the page stops."""
    state = st.session_state
    if state.get(name + "_id") != identity:
        try:
            value = compute()
        except DecodeScopeError as exc:
            keep_or_stop(exc, name in state)
            return state[name]
        state[name] = value
        state[name + "_id"] = identity
    return state[name]
