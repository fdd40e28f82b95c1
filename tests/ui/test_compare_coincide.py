"""Compare says when lanes draw the same tokens, and draws them so each line can be seen."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_helpers import figures

ROOT = Path(__file__).resolve().parents[2]


def test_top_k_1_coincides_with_greedy_and_both_lines_show(tiny_llama_folder):
    """Sampling from the single most likely token is greedy decoding: the two lanes must coincide."""
    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["max_new_tokens"] = 5
    at.session_state["cmp_lanes"] = ["greedy", "top_k", "top_p"]
    at.session_state["cmp_top_k"] = 1
    at.session_state["cmp_top_p"] = 0.05
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    notes = [i.value for i in at.info if "exactly the same" in i.value]
    # top-p 0.05 keeps only the top token as well: all three lanes are greedy
    assert len(notes) == 1 and all(name in notes[0] for name in ("Greedy", "top\\-k 1", "top\\-p 0\\.05")), notes
    lines = [d for d in figures(at)[0]["data"] if d.get("mode") == "lines+markers"]
    assert len(lines) == 3
    widths = [d["line"]["width"] for d in lines]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 3       # the lower the wider
    assert len({d["line"]["dash"] for d in lines}) == 3


def test_lanes_that_differ_are_not_called_the_same(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["max_new_tokens"] = 5
    at.session_state["cmp_lanes"] = ["greedy", "temperature"]
    at.session_state["cmp_temperature"] = 3.0
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    parted = any("parts from greedy at step" in m.value for m in at.markdown)
    same = [i.value for i in at.info if "exactly the same" in i.value]
    assert parted != bool(same)
