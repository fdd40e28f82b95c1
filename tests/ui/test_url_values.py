"""Tampered links: every URL value of every page, set far beyond its widget's range, is clamped or ignored.

The keys are read from the source (every url_value / url_number call in pages/ and ui/), so a
setting added later is covered too. A widget given a value above its maximum raises
StreamlitValueAboveMaxError; here no page may raise anything.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]

PAGES = ["step_by_step", "beam_tree", "compare", "expected_embedding", "teacher_forcing", "kv_cache", "speculative",
         "interview"]
FREE_TEXT = {"model", "prompt", "tf_reference", "server", "served_model",
             "sd_model"}     # text settings: any value is a valid text
BAD = ["5000", "99999999999999999999999", "-99999999999999999999999", "1e400", "nan"]


def url_keys() -> list:
    keys = set()
    for path in [*(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]:
        keys |= set(re.findall(r"(?:url_number|url_value|_from_url)\(\s*\"(\w+)\"", path.read_text(encoding="utf-8")))
    return sorted(keys - FREE_TEXT)


def test_the_keys_are_found():
    keys = url_keys()
    assert {"seed", "max_new_tokens", "top_k", "num_beams", "cmp_top_k", "cmp_beams", "kv_beams", "tf_eps"} <= set(keys)


@pytest.mark.parametrize("page", PAGES)
def test_url_values_beyond_every_range_never_break_a_page(tiny_llama_folder, page):
    _, folder = tiny_llama_folder
    keys = url_keys()
    for value in BAD:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.session_state["model"] = folder
        at.session_state["prompt"] = "The capital of France is"
        for key in keys:
            at.query_params[key] = value
        at.run()
        at.switch_page(f"pages/{page}.py")
        at.run()
        assert not at.exception, (page, value, [e.value for e in at.exception])
        if page == "compare" and value == "5000":
            assert at.number_input(key="cmp_top_k").value == 1000
