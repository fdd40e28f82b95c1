"""Which plotly.js the app serves: the 2-D build only when it is the wheel's own version and its bytes are the
pinned ones; anything else on disk (damaged, another version, a stranger's file) falls back to the full bundle."""
from __future__ import annotations

import hashlib

import pytest

from ui import chart


@pytest.fixture
def partial_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(chart, "PARTIAL_FOLDER", tmp_path)
    chart.plotly_source.cache_clear()
    yield tmp_path
    chart.plotly_source.cache_clear()


def test_the_version_is_read_from_the_bundles_first_comment(tmp_path):
    bundle = tmp_path / "b.js"
    bundle.write_bytes(b"/**\n* plotly.js (cartesian - minified) v4.1.1\n* Copyright\n*/\n(function(){})")
    assert chart.plotly_js_version(bundle) == "4.1.1"
    bundle.write_bytes(b"/** some other library v9.9.9 */")
    assert chart.plotly_js_version(bundle) == ""


def test_the_2d_build_is_served_only_when_its_bytes_are_the_pinned_ones(partial_folder, monkeypatch):
    version = chart.plotly_js_version(chart.FULL_BUNDLE)
    partial = partial_folder / f"plotly-cartesian-{version}.min.js"
    assert chart.plotly_source() == chart.FULL_BUNDLE              # nothing fetched: the full bundle

    partial.write_bytes(b"/** plotly.js (cartesian) v" + version.encode() + b" */ window.Plotly = {};")
    assert chart.plotly_source() == chart.FULL_BUNDLE              # bytes that are not the pinned ones
    chart.plotly_source.cache_clear()

    monkeypatch.setitem(chart.PARTIAL_SHA256, version, hashlib.sha256(partial.read_bytes()).hexdigest())
    assert chart.plotly_source() == partial
    assert chart.plotly_file() == f"plotly-cartesian-{version}.min.js"
    chart.plotly_source.cache_clear()

    monkeypatch.setattr(chart, "PARTIAL_SHA256", {"0.0.1": chart.PARTIAL_SHA256[version]})
    assert chart.plotly_source() == chart.FULL_BUNDLE              # pinned for another plotly.js version
    assert chart.plotly_file() == f"plotly-full-{version}.min.js"
