"""What the AppTest modules share: a page of the real app opened on settings, and the texts it shows."""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"


def texts(section: str, lang: str = "en") -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


def open_app(page: str, *, params: dict | None = None, state: dict | None = None,
             new_tokens: int = 2) -> AppTest:
    """app.py on `page` with these URL params and session state (PROMPT and `new_tokens` unless state says
    otherwise), run once; no exception allowed."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    for key, value in (params or {}).items():
        at.query_params[key] = str(value)
    for key, value in {"prompt": PROMPT, "max_new_tokens": new_tokens, **(state or {})}.items():
        at.session_state[key] = value
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def figures(at) -> list:
    """Every chart's Plotly figure on the page (an AppTest, or a block of one such as `at.main`), in page
    order: Streamlit's own charts and the app's chart element (ui.chart) alike."""
    from ui.chart import CHART_NAME, figure_data

    block = at.main if isinstance(at, AppTest) else at
    found = []
    for element in block:
        kind = getattr(element, "type", None)
        if kind == "plotly_chart":
            found.append(json.loads(element.proto.spec))
        elif kind == "bidi_component" and element.proto.component_name == CHART_NAME:
            found.append(figure_data(element))
    return found
