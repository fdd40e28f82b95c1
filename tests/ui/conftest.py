"""Fixtures for the AppTest tests."""
from __future__ import annotations

import pytest
import ui.shared_model
from app_helpers import install_loads
from tiny_models import tiny_llama
from streamlit.runtime.pages_manager import PagesManager


@pytest.fixture
def navigation_frame(monkeypatch):
    """Run app.py (the frame) on every page, as the server does.

    Before each run AppTest re-detects the folder named pages/ and then runs a page file
    on its own, as an old-style multipage app, skipping the frame in app.py. The server
    drops that mode as soon as app.py calls st.navigation. Make AppTest do the same.
    Modules that switch pages use it with `pytestmark = pytest.mark.usefixtures("navigation_frame")`.
    """
    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


@pytest.fixture
def tiny_loads(monkeypatch):
    """Every model the app loads is one tiny random Llama (the shared-model memory emptied before and after)."""
    lm = tiny_llama()
    install_loads(monkeypatch, lambda name: lm)
    yield lm
    ui.shared_model._models.clear()


@pytest.fixture
def no_local_loads(monkeypatch):
    """Any model the app tries to load fails the test: for pages that must show what they have (a served model,
    an uploaded trace) without the weights."""
    def refuse(*args, **kwargs):
        raise AssertionError("the page loaded a model where it needs none")

    monkeypatch.setattr(ui.shared_model, "load_model", refuse)
    monkeypatch.delenv("DECODESCOPE_MODELS", raising=False)
    ui.shared_model._models.clear()
    yield
    ui.shared_model._models.clear()
