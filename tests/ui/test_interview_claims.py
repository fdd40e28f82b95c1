"""The interview page states, in both languages, that beam search is not a soft feed-back."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def navigation_frame(monkeypatch):
    """Run app.py on every page, as the server does (see tests/ui/test_interview.py)."""
    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


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
