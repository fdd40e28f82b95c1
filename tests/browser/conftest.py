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


# The modules that take longest, started first (worker-seconds in a full run on a busy 2-core machine: 860, 625,
# 330, 165, 110, 90, and about 60 for the hostile uploads since they keep to the files a browser must see; the room
# now also holds the classroom's checks, a little longer): `make test` gives each process whole browser modules
# (tests/scheduling.py: a module's page pool and screenshots stay in one process), one at a time as it frees up,
# so the long ones must not be left for the end of one process's run.
LONGEST_FIRST = ["test_app.py", "test_stage_browser.py", "test_room_browser.py", "test_first_screen_browser.py",
                 "test_served_browser.py", "test_bad_input_browser.py", "test_hostile_uploads_browser.py",
                 "test_readable.py"]


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    ours = []
    for position, item in enumerate(items):
        if here in Path(str(item.fspath)).resolve().parents:
            ours.append(position)
            item.add_marker(pytest.mark.browser)
            if not Path(CHROMIUM).is_file():
                item.add_marker(pytest.mark.skip(reason=f"{CHROMIUM} is not installed (apt-get install chromium)"))
    # the browser tests first, longest modules first (a stable sort: each module's own order), the others after
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    ordered = sorted((items[p] for p in ours), key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))
    mine = set(ours)
    items[:] = ordered + [item for p, item in enumerate(items) if p not in mine]


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


@pytest.fixture(scope="session")
def shared_context(browser, server):
    """One browser context for the session's pages, each test a new page (tab) in it, as a returning visitor:
    its HTTP cache and compiled scripts spare every page after the first Streamlit's and Plotly's scripts again
    (~0.5 s of a page open here, and ~0.4 s of the server's CPU compressing them). The app keeps nothing in the
    browser (no cookie, no local storage), so a new tab is a new session as a new context is; a test that
    listens to a whole context, or needs a first visit's empty cache, makes its own with `new_context`."""
    ctx = new_context(browser, server)
    yield ctx
    ctx.close()


@pytest.fixture
def context(shared_context):
    return shared_context


@pytest.fixture
def page(context):
    tab = context.new_page()
    yield tab
    tab.close()
