"""The server's first model starts loading as the server starts (python -m ui.serve): a visit that comes
during that load waits for it, sees its progress, and gets the very model it loaded; nothing loads twice."""
from __future__ import annotations

import threading

import pytest
from streamlit.testing.v1 import AppTest

import ui.shared_model
from app_helpers import ROOT, figures
from tiny_models import tiny_llama

pytestmark = pytest.mark.usefixtures("navigation_frame")


class _Visited(threading.Event):
    """The early load's 'done' event; the first visit that waits on it lets the load finish."""

    def __init__(self, release: threading.Event):
        super().__init__()
        self.release = release

    def wait(self, timeout=None):
        self.release.set()
        return super().wait(timeout)


def test_a_visit_during_the_early_load_gets_that_model_and_nothing_loads_twice(monkeypatch):
    lm, release, loads = tiny_llama(), threading.Event(), []

    def load(*args, progress=None, **kwargs):
        loads.append(args)
        release.wait()                    # still loading until a visit is waiting for it
        return lm

    monkeypatch.setattr(ui.shared_model, "load_model", load)
    monkeypatch.delenv("DECODESCOPE_MODELS", raising=False)
    ui.shared_model._models.clear()
    try:
        thread = ui.shared_model.load_early()
        early = ui.shared_model._early[ui.shared_model.model_key("")]
        early.done = _Visited(release)
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.session_state["max_new_tokens"] = 2
        at.switch_page("pages/step_by_step.py").run()
        thread.join()
        assert not at.exception, at.exception
        assert release.is_set()                                  # the visit came while the model loaded
        assert len(loads) == 1                                   # ... and started no load of its own
        assert at.session_state["sbs"].lm is lm and figures(at)  # the page decoded on the early model
    finally:
        ui.shared_model._models.clear()
        ui.shared_model._early.clear()
