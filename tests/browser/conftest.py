"""The real app in a real browser: `streamlit run app.py` on a free port, driven by Playwright in Chromium.

Debian's Chromium is used (`/usr/bin/chromium`); no browser is ever downloaded. Every test
here is skipped, with the reason, when that binary is missing. Every server started here
is stopped at the end of the session (or of its test).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_helpers import CHROMIUM, CHROMIUM_ARGS, new_context, running_server
# helpers some test modules import from here
from browser_helpers import (act, assert_no_exception, click_key, open_page, screenshot,  # noqa: F401
                             set_prompt, wait_idle)


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)
            if not Path(CHROMIUM).is_file():
                item.add_marker(pytest.mark.skip(reason=f"{CHROMIUM} is not installed (apt-get install chromium)"))


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One app server for the session, on the default model cache."""
    with running_server(tmp_path_factory.mktemp("server")) as srv:
        yield srv


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        pw.stop()


@pytest.fixture
def context(browser, server):
    ctx = new_context(browser, server)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    return context.new_page()
