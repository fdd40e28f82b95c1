"""A model name in the address that is Markdown (a link and an image) is shown as text:
no link in the error box, no image, and no request leaves the page for another host."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from browser_helpers import assert_no_exception, open_page, screenshot
from figures.labels import WORD_JOINER

pytestmark = pytest.mark.browser

MARKDOWN_NAME = "[Click to fix](http://evil) ![x](http://127.0.0.1:8999/p.png)"


def test_a_markdown_model_name_in_the_address_stays_text_and_fetches_nothing(page, server):
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    open_page(page, server, "step_by_step", "model=" + quote(MARKDOWN_NAME, safe=""))
    assert_no_exception(page, server)
    alert = page.locator("[data-testid='stAlertContentError']")
    assert alert.count() == 1
    assert MARKDOWN_NAME in alert.inner_text().replace(WORD_JOINER, "")
    assert alert.locator("a").count() == 0, alert.inner_html()
    assert alert.locator("img").count() == 0, alert.inner_html()
    assert page.locator("img[src*='p.png'], a[href*='evil']").count() == 0
    elsewhere = [u for u in requests if not u.startswith((server.url, "data:", "blob:"))]
    assert not elsewhere, f"the page sent requests to other hosts: {elsewhere}"
    screenshot(page, "markdown_model_name")
