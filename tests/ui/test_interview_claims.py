"""The interview page states, in both languages, that beam search is not a soft feed-back."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("navigation_frame")


@pytest.mark.parametrize("lang,words", [
    ("en", ("Beam search", "ranks discrete prefixes by their cumulative log-probability", "pᵀE")),
    ("zh", ("束搜索", "按累计对数概率给离散的前缀排序", "pᵀE")),
])
def test_beam_search_ranks_prefixes_not_a_collapsed_softmax(lang, words):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params.update({"lang": lang})
    at.switch_page("pages/interview.py").run()
    assert not at.exception, at.exception
    lines = [line for m in at.markdown for line in m.value.splitlines()]
    assert any(all(w in line for w in words) for line in lines)
