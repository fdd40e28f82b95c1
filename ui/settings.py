"""Every setting a page keeps in its address, in one table: its type, default, range and choices.

A setting reaches a page by four ways: the address typed or linked (`read`), a link followed or Back
pressed while the page is open (`ui.url_memory.follow_link`), the session state a widget left, and the
widget's own default. All four go through `checked`: a number is parsed, must be finite and is held inside
its widget's range; a choice must be one of its choices; a text must be encodable Unicode. The widgets take
their ranges from `bounds`, so a range is written once. A value from an address that had to be changed is
named in one short note (`link_notes`), quoted only by a short prefix: an address is anyone's to write.
A page reads a setting through `url_value` or `url_number` (which also take keys outside the table) and writes
what it shows back with `sync_url`, so a copied address reproduces the view.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from urllib.parse import quote_plus

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from ui.address import GATHERED, address_value  # noqa: F401  (address_value: pages read it from here)

from engine.config import (DEFAULT_MBR_CANDIDATES, DRAFT_KINDS, DRY_BREAKERS, GRAMMAR_KINDS, GRAMMAR_STRATEGIES,
                           MAX_DRAFT_TOKENS, MAX_MBR_CANDIDATES, MAX_NEW_TOKENS, MBR_UTILITIES, SAMPLER_ORDERS,
                           STRATEGIES, VERIFY_MODES)
from engine.model import DTYPES

QUOTE_CHARS = 40        # a refused value is quoted by at most this many characters
_NOTES = "_link_notes"  # this run's notes: {key: text}


@dataclass(frozen=True)
class Setting:
    """One address setting. kind comes from the default (bool, int, float, str, list)."""
    default: object
    low: float | None = None
    high: float | None = None
    choices: tuple | None = None          # a value outside them falls back to the default
    widget: str | None = None             # its widget's session-state key, when not the address key

    @property
    def kind(self) -> type:
        return type(self.default)


LANES = ("greedy", "beam", "top_k", "top_p", "temperature", "soft")     # Compare's lanes
DEFAULT_LANES = ("greedy", "beam", "top_p", "temperature")
TAUS = (10.0, 5.0, 2.0, 1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01)           # Gumbel-softmax temperatures offered
# Expected embedding's feed-back lanes (ui.soft_inputs) and the values its select sliders offer
SI_LANES = ("pte", "soft-thinking", "mixture-of-inputs", "hidden-state", "multi-token-mean")
SI_DEFAULT_LANES = ("pte", "soft-thinking", "mixture-of-inputs", "hidden-state")
SI_COLD_TAUS = (0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0)                    # Cold Stop's threshold; 0 = off
SI_GUMBELS = (0.0, 0.1, 0.2, 0.5, 1.0)                                    # Soft Thinking's Gumbel tau; 0 = off
SI_BETAS = ("0", "0.5", "1", "2", "4", "inf")                            # Mixture of Inputs' beta

TABLE: dict[str, Setting] = {
    # the sidebar every page shares (model and prompt have defaults that depend on the language)
    "model": Setting(""),
    "prompt": Setting(""),
    "chat": Setting(False),
    "seed": Setting(0, 0, 2**31 - 1),
    "max_new_tokens": Setting(24, 1, MAX_NEW_TOKENS),
    "device": Setting("auto", choices=("auto", "cpu", "cuda", "mps")),
    "dtype": Setting("auto", choices=DTYPES),
    "server": Setting(""),
    "served_model": Setting(""),
    # the strategy controls (Step by step, Beam tree)
    "strategy": Setting("greedy", choices=STRATEGIES),
    "temperature": Setting(1.0, 0.05, 3.0),
    "top_k": Setting(0, 0, 1000),
    "top_p": Setting(1.0, 0.01, 1.0),
    "min_p": Setting(0.0, 0.0, 0.5),
    "repetition_penalty": Setting(1.0, 0.5, 2.0),
    "num_beams": Setting(4, 1, 8),
    "length_penalty": Setting(1.0, -2.0, 3.0),
    "tau": Setting(1.0, 0.05, 3.0),
    "top_n": Setting(20, 5, 50),
    "step": Setting(1, 1, MAX_NEW_TOKENS),
    # the order of the chain, and the samplers only some engines have (Step by step's advanced samplers);
    # ranges are those people use, inside what DecodeConfig.validate allows
    "sampler_order": Setting("transformers", choices=SAMPLER_ORDERS),
    "typical_p": Setting(1.0, 0.01, 1.0),
    "epsilon_cutoff": Setting(0.0, 0.0, 0.1),
    "eta_cutoff": Setting(0.0, 0.0, 0.1),
    "top_h": Setting(0.0, 0.0, 1.0),
    "no_repeat_ngram_size": Setting(0, 0, 8),
    "presence_penalty": Setting(0.0, -2.0, 2.0),
    "frequency_penalty": Setting(0.0, -2.0, 2.0),
    "penalty_last_n": Setting(64, -1, 4096),
    "dry_multiplier": Setting(0.0, 0.0, 5.0),
    "dry_base": Setting(1.75, 1.0, 4.0),
    "dry_allowed_length": Setting(2, 0, 16),
    "dry_penalty_last_n": Setting(-1, -1, 4096),
    "dry_sequence_breakers": Setting(DRY_BREAKERS),
    "top_n_sigma": Setting(0.0, 0.0, 5.0),
    "xtc_probability": Setting(0.0, 0.0, 1.0),
    "xtc_threshold": Setting(0.1, 0.0, 1.0),
    "dynatemp_range": Setting(0.0, 0.0, 2.0),
    "dynatemp_exponent": Setting(1.0, 0.1, 4.0),
    "mirostat": Setting(0, 0, 2, choices=(0, 1, 2)),
    "mirostat_tau": Setting(5.0, 0.5, 10.0),
    "mirostat_eta": Setting(0.1, 0.01, 1.0),
    "samplers": Setting(""),
    # Beam tree
    "early_stopping": Setting(False),
    "rerank_lp": Setting(1.0, -2.0, 3.0),
    # Compare
    "lanes": Setting(list(DEFAULT_LANES), choices=LANES, widget="cmp_lanes"),
    "cmp_top_k": Setting(40, 1, 1000),
    "cmp_top_p": Setting(0.9, 0.05, 1.0),
    "cmp_temperature": Setting(0.7, 0.1, 3.0),
    "cmp_beams": Setting(4, 2, 8),
    # Expected embedding
    "ee_discrete": Setting("greedy", choices=("greedy", "sample")),
    "ee_temperature": Setting(1.0, 0.1, 3.0),
    "ee_tau": Setting(1.0, 0.01, 10.0, choices=TAUS),
    "ee_hard": Setting(False),
    "si_lanes": Setting(list(SI_DEFAULT_LANES), choices=SI_LANES),
    "si_k": Setting(10, 1, 50),
    "si_chain": Setting(True),
    "si_cold_tau": Setting(0.1, 0.0, 1.0, choices=SI_COLD_TAUS),
    "si_cold_l": Setting(4, 1, 64),
    "si_gumbel": Setting(0.0, 0.0, 1.0, choices=SI_GUMBELS),
    "si_beta": Setting("1", choices=SI_BETAS),
    "si_mtm_k": Setting(4, 1, 64),
    "si_step": Setting(1, 1, MAX_NEW_TOKENS),
    "si_probe": Setting(False),
    # Teacher forcing
    "tf_reference": Setting(""),
    "tf_for": Setting(""),
    "tf_mode": Setting("greedy", choices=("greedy", "sample")),
    "tf_temperature": Setting(1.0, 0.1, 2.0),
    "tf_eps": Setting(0.3, 0.0, 1.0),
    "tf_curve": Setting(False),
    # KV cache
    "kv_strategy": Setting("greedy", choices=("greedy", "beam")),
    "kv_beams": Setting(4, 2, 8),
    # Speculative decoding
    "sd_kind": Setting("early-exit", choices=DRAFT_KINDS),
    "sd_layer": Setting(20, 1, 128),
    "sd_ngram": Setting(2, 1, 8),
    "sd_model": Setting(""),
    "sd_k": Setting(4, 1, MAX_DRAFT_TOKENS),
    "sd_verify": Setting("greedy", choices=VERIFY_MODES),
    "sd_temperature": Setting(1.0, 0.1, 3.0),
    "sd_top_k": Setting(0, 0, 1000),
    "sd_top_p": Setting(1.0, 0.05, 1.0),
    "sd_pos": Setting(""),
    "sd_n": Setting(20_000, 1000, 200_000),
    # Structured output
    "so_kind": Setting("json_schema", choices=GRAMMAR_KINDS),
    "so_example": Setting(""),
    "so_strategy": Setting("greedy", choices=GRAMMAR_STRATEGIES),
    "so_grammar": Setting(""),
    "so_step": Setting(1, 1, MAX_NEW_TOKENS),
    # Whole answers
    "wa_depth": Setting(8, 1, 16),
    "wa_budget": Setting(200, 16, 1000),
    "wa_branch": Setting(6, 2, 16),
    "wa_samples": Setting(32, 0, 128),
    "wa_dist": Setting("model", choices=("model", "sampler")),
    "wa_temperature": Setting(1.0, 0.1, 3.0),
    "wa_top_p": Setting(1.0, 0.05, 1.0),
    "wa_beams": Setting(["4"], choices=("2", "4", "8")),
    "wa_mbr": Setting("text", choices=MBR_UTILITIES),            # agreement: the utility
    "wa_mbr_k": Setting(DEFAULT_MBR_CANDIDATES, 1, MAX_MBR_CANDIDATES),   # and how many candidates
    # Same prompt, another answer
    "rp_sizes": Setting(["1", "2", "4", "8"], choices=("1", "2", "3", "4", "8", "16")),
    "rp_fill": Setting("same", choices=("same", "padded")),
    "rp_prefill": Setting("whole", choices=("whole", "chunked", "stepwise")),
    "rp_chunk": Setting(4, 1, 64),
    "rp_dtype": Setting("float32", choices=("float32", "bfloat16")),
    "rp_invariant": Setting(False),
    "rp_verify": Setting(0, 0, 8),
    "rp_requests": Setting(8, 1, 64),
    "rp_levels": Setting(["1", "4"], choices=("1", "2", "4", "8", "16")),
    "wa_stops": Setting("none", choices=("none", "newline", "period", "cjk_period", "newline_cjk_period", "own")),
    "wa_stop_own": Setting(""),
}


class Unusable(ValueError):
    """A value no widget can take: the reason, in the note's words."""


def bounds(key: str) -> tuple:
    """(low, high) of a numeric setting, for its widget."""
    setting = TABLE[key]
    return setting.low, setting.high


def widget_key(key: str) -> str:
    """The session-state key of the widget that shows the address key `key`."""
    setting = TABLE.get(key)
    return (setting.widget if setting else None) or key


def encodable(text: str) -> str:
    """`text` with lone surrogates (which no page can encode or send) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


def parse(key: str, text: str, setting: Setting | None = None):
    """The address's text as the setting's value, held inside its range; Unusable when nothing usable is
    there (not a number, not finite, not one of the choices)."""
    setting = setting or TABLE[key]
    kind = setting.kind
    if kind is bool:
        if text in ("1", "true", "True"):
            return True
        if text in ("0", "false", "False", ""):
            return False
        raise Unusable("not_switch")
    if kind in (int, float):
        try:
            number = float(text)
        except (TypeError, ValueError):
            raise Unusable("not_number") from None
        if not math.isfinite(number):
            raise Unusable("not_finite")
        return clamp(setting, kind(number) if kind is float else int(number))
    if kind is list:
        items = [x for x in encodable(str(text)).split(",") if x]
        kept = [x for x in items if setting.choices is None or x in setting.choices]
        if items and not kept:
            raise Unusable("not_choice")
        return kept
    text = encodable(str(text))
    if setting.choices is not None and text not in setting.choices:
        raise Unusable("not_choice")
    return text


def clamp(setting: Setting, value):
    """A number held inside the setting's range (and on the nearest of its choices, if it has some)."""
    if setting.choices is not None:
        return min(setting.choices, key=lambda choice: abs(choice - value))
    if setting.low is not None:
        value = max(value, setting.kind(setting.low))
    if setting.high is not None:
        value = min(value, setting.kind(setting.high))
    return value


def checked(key: str, value, setting: Setting | None = None):
    """A value from session state (a widget's, or one set by code) as the setting allows it; Unusable if not."""
    setting = setting or TABLE[key]
    kind = setting.kind
    if kind is bool:
        return bool(value)
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unusable("not_number")
        if isinstance(value, float) and not math.isfinite(value):
            raise Unusable("not_finite")
        try:
            return clamp(setting, kind(value))
        except OverflowError:
            raise Unusable("not_finite") from None
    if kind is list:
        return [encodable(str(x)) for x in value if setting.choices is None or x in setting.choices]
    text = encodable(str(value))
    if setting.choices is not None and text not in setting.choices:
        raise Unusable("not_choice")
    return text


def read(key: str, default=None, setting: Setting | None = None):
    """A setting from session state, else the address, else the default; always a value its widget takes.
    default: overrides the table's (a page's own opening length, a prompt in the user's language)."""
    setting = setting or TABLE[key]
    fallback = setting.default if default is None else default
    widget = setting.widget or key
    if widget in st.session_state:
        held = st.session_state[widget]
        try:
            value = checked(key, held, setting)
        except Unusable:
            _forget(widget)
        else:
            if value != held or type(value) is not type(held):
                hold(widget, value)
            return value
    raw = address_value(key)
    if raw is None:
        return fallback
    try:
        value = parse(key, raw, setting)
    except Unusable as why:
        _note(key, raw, str(why), fallback)
        return fallback
    note_changes(key, raw, value, setting)
    return value


def note_changes(key: str, raw: str, value, setting: Setting | None = None) -> None:
    """Name, in this run's notes, an address value that was held in range or had characters replaced."""
    setting = setting or TABLE[key]
    if setting.kind in (int, float) and value != _plain(raw, setting.kind):
        _note(key, raw, "held", value)
    elif setting.kind is str and value != raw:
        _note(key, raw, "unicode", value)


def hold(widget: str, value) -> None:
    """Put a checked value where its widget reads it (not possible once the widget is drawn in this run)."""
    try:
        st.session_state[widget] = value
    except st.errors.StreamlitAPIException:
        pass


def _forget(widget: str) -> None:
    try:
        del st.session_state[widget]
    except (KeyError, st.errors.StreamlitAPIException):
        pass


def _plain(raw: str, kind: type):
    """The number the address wrote, before clamping (for the note that says it was held)."""
    number = float(raw)
    return number if kind is float else int(number)


def _note(key: str, raw: str, why: str, used) -> None:
    """Remember, for this run, that the address's `key` could not be used as written."""
    from figures.labels import one_line
    from ui.i18n import t

    def quoted(value) -> str:
        text = encodable(",".join(map(str, value)) if isinstance(value, list) else str(value))
        return one_line(text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "…")

    notes = st.session_state.setdefault(_NOTES, {})
    notes[key] = t(f"common.link_{why}", name=one_line(key[:QUOTE_CHARS]), value=quoted(raw), used=quoted(used))


def link_notes() -> list:
    """The notes of this run (and forget them): what the address asked that a page could not do as written."""
    return list(st.session_state.pop(_NOTES, {}).values())


# ---- a page's reads and writes of its address ---------------------------------------------
URL_PROMPT_LIMIT = 4000     # bytes a prompt may take in the URL, percent-encoded as the address carries it


def url_bytes(text: str) -> int:
    """Bytes `text` takes in an address: an emoji is 4 UTF-8 bytes, 12 once percent-encoded."""
    return len(quote_plus(text, errors="surrogatepass"))


def url_value(key: str, default, kind=str):
    """A setting from session state, else the URL, else the default, checked by `read` (a key not in the table
    is read by the same rules, with no range)."""
    if key in TABLE:
        return read(key, default)
    return read(key, setting=Setting(kind(default) if kind is not str else str(default)))


def url_number(key: str, default, low, high, kind=None):
    """A numeric setting held inside [low, high]; keys in `TABLE` take the table's range."""
    kind = kind or type(default)
    if key not in TABLE:
        return read(key, setting=Setting(kind(default), low, high))
    # the table's check, then the bounds this call gives (a range that depends on the run, such as the layers of
    # the model loaded now); a widget's kept value outside them is held too, or the widget would refuse it
    value = min(max(read(key, default), kind(low)), kind(high))
    if key in st.session_state and st.session_state[key] != value:
        hold(key, value)
    return value


_GATHERED = GATHERED


@contextlib.contextmanager
def one_address_write():
    """Gather the address writes of a whole run and send them as one write at its end. Streamlit's page adds a
    browser history entry for every write, so the browser's Back walked through one run's writes (the interface
    and settings brought back after a page switch, the sidebar's, the page's, the step) one press at a time.
    A run that ends early (Stop, another click, a switch) still sends what it gathered when Streamlit lets it;
    a fragment's own run (Next, Back) does not pass through here, and writes at once."""
    st.session_state[_GATHERED] = {}
    try:
        yield
    finally:
        try:
            send_gathered()
        except ScriptControlException:     # a Stop or a new run came first: that run writes the address anew
            pass
        finally:
            st.session_state.pop(_GATHERED, None)


def send_gathered() -> None:
    """Send the address writes this run has gathered so far, now, and go on gathering: before a long decode,
    whose Stop would end the run before its one write (a link copied after a Stop then had the old settings)."""
    gathered = st.session_state.get(_GATHERED)
    if gathered:
        st.query_params.from_dict(_overlaid(gathered))
        gathered.clear()


def rerun(scope: str = "app") -> None:
    """st.rerun, after sending the address writes gathered so far: the next run starts from the address this
    run has sent, and would not see what it only gathered (a page switch's settings brought back, say)."""
    send_gathered()
    st.rerun(scope=scope)


def _overlaid(gathered: dict) -> dict:
    address = {key: text for key, text in st.query_params.to_dict().items() if gathered.get(key, "") is not None}
    address.update({key: text for key, text in gathered.items() if text is not None})
    return address


def address() -> dict:
    """The address's settings as this run has left them so far (its gathered writes included)."""
    gathered = st.session_state.get(_GATHERED)
    return _overlaid(gathered) if gathered else st.query_params.to_dict()


def sync_url(**values) -> None:
    """Write settings into the URL so a copied address reproduces the view: the changed ones in one write,
    since the browser adds a history entry for every write (the browser's Back would step through them);
    during a whole run they wait for its one write (`one_address_write`).
    A value of None is left out of the address (a text too long for a link: `linkable`)."""
    texts = {key: None if value is None else ("1" if value else "0") if isinstance(value, bool) else str(value)
             for key, value in values.items()}
    changed = {key: text for key, text in texts.items() if address_value(key) != text}
    if not changed:
        return
    gathered = st.session_state.get(_GATHERED)
    if gathered is not None:
        gathered.update(changed)
        return
    written = {key: text for key, text in changed.items() if text is not None}
    if written:
        st.query_params.update(written)
    for key in changed:
        if changed[key] is None:
            st.query_params.pop(key, None)


def linkable(text: str) -> str | None:
    """A free text (prompt, reference) as the URL may carry it, or None when it would make the address too long
    for a link (URL_PROMPT_LIMIT bytes, percent-encoded): `sync_url` then leaves it out."""
    return text if url_bytes(text) <= URL_PROMPT_LIMIT else None


def sync_long_text(key: str, text: str) -> None:
    """Write a free text (prompt, reference) into the URL, or leave it out when it is too long for a link."""
    sync_url(**{key: linkable(text)})
