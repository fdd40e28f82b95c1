"""Tampered links: every address setting of every page, on every way in, is checked, held or refused.

The settings come from `ui.settings.TABLE`, the one table the widgets, the address reader and
`follow_link` use; a first test checks against the source that no page reads an address key the table
lacks. References: the table's ranges (a widget given a value outside them raises
StreamlitValueAboveMaxError), Python's own float parsing (what is finite), and the note's own wording in
assets/texts.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tiers import spread
from ui.settings import TABLE

ROOT = Path(__file__).resolve().parents[2]

PAGES = ["step_by_step", "beam_tree", "compare", "expected_embedding", "teacher_forcing", "kv_cache", "speculative",
         "structured", "answers", "interview"]
NUMBERS = sorted(k for k, s in TABLE.items() if s.kind in (int, float))
# far out of range, beyond int64, beyond float (an overflow), not finite, not a number
BAD = ["5000", "-99999999999999999999999", "9" * 400, "1e400", "nan", "-inf", "zwei"]
INTERFACE = {"lang", "present", "tour"}
DYNAMIC = {"sd_layer", "so_step", "si_step"}  # ranges that depend on the run (the model's layers, the steps decoded)


def page_sources() -> list:
    return [*(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]


def test_every_address_key_a_page_reads_or_writes_is_in_the_table():
    read = set()
    written = set()
    for path in page_sources():
        source = path.read_text(encoding="utf-8")
        read |= set(re.findall(r"\b(?:read|url_number|url_value)\(\s*\"(\w+)\"", source))
        for call in re.findall(r"sync_url\(([^)]*)\)", source):
            written |= set(re.findall(r"(\w+)=", call))
    assert {"seed", "max_new_tokens", "top_k", "num_beams", "cmp_top_k", "kv_beams", "tf_eps", "ee_tau"} <= read
    assert (read | written) - INTERFACE - {"KEY"} <= set(TABLE), sorted((read | written) - set(TABLE) - INTERFACE)


def widgets(at: AppTest) -> list:
    return [*at.slider, *at.number_input, *at.select_slider]


def test_the_widgets_take_their_ranges_from_the_table(tiny_llama_folder):
    _, folder = tiny_llama_folder
    seen = set()
    for page, state in [("step_by_step", {"strategy": "sample"}), ("step_by_step", {"strategy": "beam"}),
                        ("step_by_step", {"strategy": "sample", "sampler_order": "llama.cpp"}),
                        ("beam_tree", {}), ("compare", {}), ("expected_embedding", {}), ("teacher_forcing", {}),
                        ("kv_cache", {}), ("speculative", {"sd_verify": "sample"})]:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        for key, value in {"model": folder, "prompt": "The capital of France is", "max_new_tokens": 2,
                           **state}.items():
            at.session_state[key] = value
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
        for widget in widgets(at):
            setting = TABLE.get(widget.key)
            if setting is None or setting.low is None or widget.type == "select_slider" or widget.key in DYNAMIC:
                continue
            assert (widget.min, widget.max) == (setting.low, setting.high), widget.key
            seen.add(widget.key)
    assert {"seed", "max_new_tokens", "temperature", "top_p", "num_beams", "cmp_top_p", "ee_temperature",
            "tf_temperature", "tf_eps", "kv_beams", "rerank_lp", "top_n", "sd_k", "sd_top_p", "sd_n", "epsilon_cutoff",
            "typical_p", "dry_base", "penalty_last_n", "mirostat_tau", "xtc_threshold"} <= seen, seen


def app_on(folder: str, params: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = "The capital of France is"
    for key, value in params.items():
        at.query_params[key] = value
    return at


def in_range(at: AppTest) -> None:
    for widget in widgets(at):
        setting = TABLE.get(widget.key)
        if setting is not None and setting.low is not None and widget.type != "select_slider":
            assert setting.low <= widget.value <= setting.high, (widget.key, widget.value)


@pytest.mark.parametrize("page", spread(PAGES, 3))
def test_numbers_beyond_every_range_in_a_link_never_break_a_page(tiny_llama_folder, page):
    """The address as the page opens with it: held inside the range, or the default, with a note."""
    _, folder = tiny_llama_folder
    for value in BAD:
        at = app_on(folder, {key: value for key in NUMBERS})
        at.run()                                      # the root address with settings opens the first page
        toasts = [toast.value for toast in at.toast]
        at.switch_page(f"pages/{page}.py")
        at.run()
        toasts += [toast.value for toast in at.toast]
        assert not at.exception, (page, value, [e.value for e in at.exception])
        in_range(at)
        if page == "compare" and value == "5000":
            assert at.number_input(key="cmp_top_k").value == TABLE["cmp_top_k"].high
        if page == "step_by_step" and value in ("1e400", "nan", "-inf"):
            assert at.number_input(key="seed").value == 0
            assert any("seed=" in toast and "finite" in toast for toast in toasts), toasts


# A link followed (or Back pressed) while a page is open changes the address under widgets that already hold
# values in session state: ui.url_memory.follow_link hands the new values to them. A small app plays what app.py
# does around every page, with one widget per numeric setting of the table, so every setting goes through
# follow_link in one run (the pages, with the navigation_frame fixture, hold only their own).
def framed_widgets(keys: list) -> None:
    import streamlit as st

    from ui import settings, url_memory

    url_memory.restore_settings("page")
    for key in keys:
        low, high = settings.bounds(key)
        kind = settings.TABLE[key].kind
        if settings.TABLE[key].choices:
            st.select_slider(key, list(settings.TABLE[key].choices), key=key, value=settings.read(key))
        else:
            st.slider(key, kind(low), kind(high), key=key, value=settings.read(key))
    url_memory.remember()
    for note in settings.link_notes():
        st.toast(note)


@pytest.mark.parametrize("value", ["1e400", "9" * 400, "-5000", "5000", "nan", "-inf", "zwei", "0x10"])
def test_every_number_through_a_followed_link_is_held_or_refused(value):
    at = AppTest.from_function(framed_widgets, kwargs=dict(keys=NUMBERS), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    for key in NUMBERS:
        at.query_params[key] = value              # what a link, Back or Forward does to the address
    at.run()
    assert not at.exception, (value, [e.value for e in at.exception])
    for key in NUMBERS:
        shown = (at.select_slider if TABLE[key].choices else at.slider)(key=key).value
        setting = TABLE[key]
        assert setting.low <= shown <= setting.high, (key, shown)
        number = float(value) if value not in ("zwei", "0x10") else None
        if number is None or number != number or abs(number) == float("inf"):
            assert shown == setting.default, (key, value, shown)      # nothing usable: the default


def test_a_followed_link_in_range_still_sets_the_widget():
    at = AppTest.from_function(framed_widgets, kwargs=dict(keys=["cmp_top_p", "cmp_beams", "ee_tau"]))
    at.run()
    at.query_params["cmp_top_p"] = "0.5"
    at.query_params["cmp_beams"] = "1e3"            # written as a float, beyond the range: held at 8
    at.query_params["ee_tau"] = "0.3"               # between two offered values: the nearer one
    at.run()
    assert not at.exception
    assert at.slider(key="cmp_top_p").value == pytest.approx(0.5)
    assert at.slider(key="cmp_beams").value == TABLE["cmp_beams"].high
    assert at.select_slider(key="ee_tau").value == 0.2
    toasts = [toast.value.replace("\\", "") for toast in at.toast]      # what was changed is named, not what was taken
    assert any("cmp_beams=1e3" in toast and "held at 8" in toast for toast in toasts), toasts
    assert not any("cmp_top_p" in toast for toast in toasts), toasts


def test_a_lone_surrogate_in_a_kept_text_is_replaced(tiny_llama_folder):
    """No page can encode a lone surrogate (the browser message is UTF-8): a text that holds one, in
    session state, reaches the widget with U+FFFD in its place. (AppTest cannot put one in an address: its
    own encoder refuses; the address's way in is parsed by the same function, checked below.)"""
    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = "Paris \ud800 is"
    at.session_state["max_new_tokens"] = 2
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    assert at.text_area(key="prompt").value == "Paris \ufffd is"


@pytest.mark.parametrize("key", ["prompt", "tf_reference", "model", "served_model", "strategy"])
def test_a_lone_surrogate_in_an_address_text_never_reaches_a_widget(key):
    from ui.settings import Unusable, parse

    try:
        value = parse(key, "Paris \udc80 is")
    except Unusable:                  # a choice: no text with a surrogate is one of them
        assert TABLE[key].choices
        return
    assert value == "Paris \ufffd is"
    value.encode("utf-8")


def test_a_shared_link_leaves_out_defaults_and_opens_on_the_same_settings(tiny_llama_folder):
    """The copy-link box holds only settings away from their defaults (a link short enough to fit its box on a
    projector); opened in a fresh session it gives every strategy setting the value it had."""
    from urllib.parse import parse_qsl

    _, folder = tiny_llama_folder
    at = app_on(folder, {})
    for key, value in {"strategy": "sample", "temperature": 0.7, "seed": 5, "max_new_tokens": 3}.items():
        at.session_state[key] = value
    at.switch_page("pages/step_by_step.py").run()
    at.run()                              # the box shows the address the last run left
    assert not at.exception, at.exception
    link = next(code.value for code in at.code if code.value.startswith("?"))
    params = dict(parse_qsl(link[1:]))
    assert {"temperature": "0.7", "seed": "5", "max_new_tokens": "3", "strategy": "sample"}.items() <= params.items()
    assert not {"top_k", "top_p", "min_p", "present", "num_beams", "sampler_order", "typical_p", "mirostat",
                "dry_sequence_breakers", "samplers"} & set(params), link
    other = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in params.items():
        other.query_params[key] = value
    other.switch_page("pages/step_by_step.py").run()
    assert not other.exception, other.exception
    for key in ("strategy", "temperature", "top_k", "top_p", "min_p", "seed", "max_new_tokens", "prompt", "model"):
        assert other.session_state[key] == at.session_state[key], key
