"""Presentation mode as a stage: intro, upload and settings fold into one row; the main figure comes first."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import figures

ROOT = Path(__file__).resolve().parents[2]

# page -> Streamlit key of its main figure (the browser test measures where it lands)
MAIN_FIGURE = {"step_by_step": "sbs_chart", "beam_tree": "beam_chart", "compare": "cmp_chart",
               "expected_embedding": "ee_lane_chart", "teacher_forcing": "tf_forced_chart", "kv_cache": "kv_rows_chart"}


pytestmark = pytest.mark.usefixtures("navigation_frame")


def texts(section: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / "en" / f"{section}.json").read_text(encoding="utf-8"))


def open_page(folder: str, page: str, present: bool) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["max_new_tokens"] = 4
    at.query_params["present"] = "1" if present else "0"
    at.query_params["tour"] = "0"
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def chart_titles(at: AppTest) -> list:
    return [fig["layout"].get("title", {}).get("text", "") for fig in figures(at.main)]


@pytest.mark.parametrize("page", list(MAIN_FIGURE))
def test_presentation_folds_the_top_into_one_row_and_keeps_the_settings(tiny_llama_folder, page):
    _, folder = tiny_llama_folder
    at = open_page(folder, page, present=True)
    labels = [p.proto.popover.label for p in at.main.get("popover")]
    present = texts("present")
    assert present["about"] in labels and present["settings"] in labels, labels
    intro = texts({"step_by_step": "step", "beam_tree": "beam", "compare": "compare", "expected_embedding": "embedding",
                   "teacher_forcing": "teacher", "kv_cache": "kv"}[page])["intro"]
    assert not any(c.value == intro for c in at.main.caption)          # the intro is folded, not a caption
    assert any(m.value == intro for m in at.main.markdown)             # ... and still there, in its popover
    # the same figure as without presentation mode, and it is the first one on the page
    plain = open_page(folder, page, present=False)
    assert chart_titles(at)[0] == chart_titles(plain)[0]
