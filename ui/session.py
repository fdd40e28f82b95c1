"""The one model shared by all sessions, and the shared sidebar settings kept in the URL.

The model is loaded once per process and never mutated, so every browser session can
use it at once; each decode draws from its own seeded torch.Generator. Per-user
results live in st.session_state.
"""
from __future__ import annotations

import gc
import math
import os
import threading
from dataclasses import dataclass
from urllib.parse import quote_plus

import streamlit as st

from engine import DEFAULT_MODEL, ConfigError, DecodeScopeError, ModelLoadError, load_model
from engine.model import BUNDLED, DTYPES, bundled_named
from engine.tokens import unpaired_surrogate
from figures.labels import for_markdown
from ui.i18n import LANGUAGES, language, t
from ui.stepper import OPENINGS

_load_lock = threading.Lock()


@st.cache_resource(show_spinner=False)
def _models() -> dict:
    """name -> LoadedModel, one dict per server process."""
    return {}


def offered_models() -> tuple | None:
    """The models this server offers, from DECODESCOPE_MODELS (comma-separated; `bundled` is the
    bundled model), or None when any name may be loaded. A shared deployment pins its models so
    that nobody, and no uploaded file, makes the server fetch or load another."""
    raw = os.environ.get("DECODESCOPE_MODELS", "").strip()
    if not raw:
        return None
    names = [_bundled_or(n.strip()) for n in raw.split(",") if n.strip()]
    return tuple(dict.fromkeys(names)) or None


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


ZH_DEMO_PROMPT = "中国的首都是"


def demo_language_settings() -> dict:
    """What a demo link changes for the reader's language: with the Chinese interface, a Chinese
    prompt on the bundled model that writes Chinese (SmolLM2 answers Chinese with noise), where
    this server offers it."""
    from engine.model import GEMMA3

    if language() == "zh" and offers(GEMMA3.key):
        return {"prompt": ZH_DEMO_PROMPT, "model": GEMMA3.key}
    return {}


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
    """A setting from session state, else the URL, else the default (bad URL values fall back)."""
    if key in st.session_state:
        return st.session_state[key]
    raw = st.query_params.get(key)
    if raw is None:
        return default
    try:
        if kind is bool:
            return raw in ("1", "true", "True")
        value = kind(raw)
    except (TypeError, ValueError):
        return default
    if isinstance(value, float) and not math.isfinite(value):
        return default          # "nan" and "inf" parse as floats, but no setting means them
    return value


def url_number(key: str, default, low, high, kind=None):
    """A numeric setting from session state or the URL, held inside the widget's range [low, high]
    (a hand-edited URL must not crash a widget). kind: int or float, else the default's type."""
    kind = kind or type(default)
    value = url_value(key, default, kind)
    try:
        return min(max(kind(value), low), high)
    except (TypeError, ValueError, OverflowError):
        return default


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


DEFAULT_PROMPT = "The capital of France is"


DEFAULT_NEW_TOKENS = 24
LIGHT_NEW_TOKENS = 12       # pages that run several decodes open with this length: an answer in seconds on 2 cores


def shared_sidebar(default_new_tokens: int = DEFAULT_NEW_TOKENS) -> SharedSettings:
    """The sidebar every page shares: language, model, prompt, chat switch, seed, length.

    default_new_tokens: the length a page opens with when neither the session nor the URL has one."""
    st.session_state["_errors_shown"] = set()        # a new run: messages may be shown again (keep_or_stop)
    with st.sidebar:
        st.selectbox(t("common.language"), list(LANGUAGES), format_func=LANGUAGES.get, key="lang",
                     index=list(LANGUAGES).index(language()))
        model = model_controls()
        prompt = st.text_area(t("common.prompt"), value=url_value("prompt", DEFAULT_PROMPT), key="prompt", height=90)
        chat = st.toggle(t("common.chat"), value=url_value("chat", False, bool), key="chat", help=t("common.chat_help"))
        seed = st.number_input(t("common.seed"), min_value=0, max_value=2**31 - 1, step=1,
                               value=url_number("seed", 0, 0, 2**31 - 1), key="seed")
        max_new = st.number_input(t("common.max_new_tokens"), min_value=1, max_value=1024, step=1,
                                  value=url_number("max_new_tokens", default_new_tokens, 1, 1024), key="max_new_tokens")
    prompt = _prompt_within_limit(prompt, model)
    settings = SharedSettings(model=model, prompt=prompt, chat=chat, seed=int(seed), max_new_tokens=int(max_new),
                              lang=language())
    sync_url(model=model, chat=chat, seed=settings.seed, max_new_tokens=settings.max_new_tokens, lang=settings.lang)
    if url_bytes(prompt) <= URL_PROMPT_LIMIT:
        sync_url(prompt=prompt)
    else:                       # a pasted book does not belong in an address bar or a share link
        st.query_params.pop("prompt", None)
    return settings


MODEL_CHOICES = (*BUNDLED, "other")      # the bundled models by their short names, then any other


def _choose_model() -> None:
    """The choice box's callback: a bundled model fills the Model box; "another" empties it for typing."""
    choice = st.session_state["model_choice"]
    st.session_state["_model_other"] = choice == "other"
    if choice != "other":
        st.session_state["model"] = choice
    elif bundled_named(st.session_state.get("model", "")) is not None:
        st.session_state["model"] = ""


def _choice_of(model: str) -> str:
    bundled = bundled_named(model)
    if st.session_state.get("_model_other") and not (model or "").strip():
        return "other"
    return bundled.key if bundled is not None else "other"


def model_controls() -> str:
    """The model choice (each bundled model named for what it is, or another), the Model box, and the
    device and precision it runs in. Returns what the Model box holds."""
    model_now = url_value("model", "")
    st.session_state["model_choice"] = _choice_of(model_now)
    labels = {c: t(f"common.model_choice_{c.replace('-', '_')}") for c in MODEL_CHOICES}   # in this run's language
    st.selectbox(t("common.model_choice"), MODEL_CHOICES, key="model_choice", on_change=_choose_model,
                 format_func=labels.get)
    model = st.text_input(t("common.model"), value=model_now, key="model",
                          placeholder=DEFAULT_MODEL, help=t("common.model_help"))
    devices = ["auto", "cpu"] + [d for d, ok in (("cuda", _cuda()), ("mps", _mps())) if ok]
    with st.expander(t("common.placement")):
        device = st.selectbox(t("common.device"), devices, key="device", help=t("common.device_help"),
                              index=devices.index(url_value("device", "auto")) if url_value("device", "auto") in devices else 0)
        dtype = st.selectbox(t("common.dtype"), DTYPES, key="dtype", help=t("common.dtype_help"),
                             index=DTYPES.index(url_value("dtype", "auto")) if url_value("dtype", "auto") in DTYPES else 0)
    sync_url(device=device, dtype=dtype)
    return model


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _mps() -> bool:
    import torch

    return torch.backends.mps.is_available()


def _prompt_within_limit(prompt: str, model: str) -> str:
    """The prompt, or the last one within the limits when this one is over them: refused here, before
    any forward pass, and the results of the last good prompt stay on screen. Bytes are counted
    first; tokens too when the model is already loaded (tokenizing takes milliseconds)."""
    size = len(prompt.encode("utf-8", errors="surrogatepass"))
    if size > PROMPT_LIMIT_BYTES:
        problem = t("common.prompt_too_big", n=f"{size:,}", limit=f"{PROMPT_LIMIT_BYTES:,}")
    else:
        lm = _models().get(model_key(model))
        tokens = 0
        if lm is not None and unpaired_surrogate(prompt) is None:      # (the engine names a lone surrogate)
            tokens = len(lm.tokenizer(prompt)["input_ids"])
        if tokens <= PROMPT_LIMIT_TOKENS:
            st.session_state["_last_good_prompt"] = prompt
            return prompt
        problem = t("common.prompt_too_many_tokens", n=f"{tokens:,}", limit=f"{PROMPT_LIMIT_TOKENS:,}")
    previous = st.session_state.get("_last_good_prompt")
    keep_or_stop(ConfigError("prompt", problem), have_previous=previous is not None)
    return previous


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
    kv = get("kv_bytes_per_token")
    with st.sidebar.expander(t("common.model_facts"), expanded=False):
        st.markdown(t("common.model_facts_body", name=for_markdown(str(get("name") or "?")),
                      device=for_markdown(str(get("device") or "?")), dtype=for_markdown(str(get("dtype") or "?")),
                      parameters=_human(get("parameters")), vocab=_count(get("vocab_size")),
                      layers=_count(get("layers")), kv=_count(kv),
                      kv_k=f"{kv / 1024:.1f}" if isinstance(kv, int) and not isinstance(kv, bool) else "?"))


def share_link() -> str:
    """The address of this page with every setting in its query string."""
    from urllib.parse import urlencode, urlsplit, urlunsplit

    try:
        base = st.context.url or ""
    except Exception:   # noqa: BLE001 - no browser (tests, bare mode)
        base = ""
    parts = urlsplit(base)
    query = urlencode(st.query_params.to_dict())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, "")) if base else "?" + query


def copy_link_control() -> None:
    """A "copy link" box in the sidebar: the code block has Streamlit's copy button."""
    with st.sidebar.popover(t("common.copy_link"), icon="🔗", width="stretch"):
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
