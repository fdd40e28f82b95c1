"""Which plotly.js a page inlines or serves: the 2-D build that setup fetches (Makefile: PARTIAL_PLOTLY) when it
is on disk and whole, else the full bundle inside the `plotly` wheel.

Found without importing plotly (a path is all that is needed), so the command line stays light. The app's chart
(ui/chart.py) and the lesson file take the same bundle, and both name it the same way.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import sys
from pathlib import Path


def _wheel_folder() -> Path:
    spec = importlib.util.find_spec("plotly")
    return Path(spec.origin).resolve().parent if spec and spec.origin else Path(sys.prefix)


FULL_BUNDLE = _wheel_folder() / "package_data" / "plotly.min.js"
# the 2-D build that setup fetches into the virtual environment (Makefile: PARTIAL_PLOTLY), by plotly.js version
PARTIAL_FOLDER = Path(sys.prefix) / "share" / "decodescope"
PARTIAL_SHA256 = {"4.1.1": "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a"}


def plotly_js_version(bundle: Path) -> str:
    """The plotly.js version a bundle names in its first comment ('plotly.js v4.1.1'), else ''."""
    with bundle.open("rb") as f:
        found = re.search(rb"plotly\.js[^\n]*? v(\d+\.\d+\.\d+)", f.read(300))
    return found.group(1).decode() if found else ""


def choose_bundle(full: Path, folder: Path, pins: dict) -> Path:
    """The 2-D build of the full bundle's own plotly.js version when it is in `folder` and whole (its SHA-256
    as pinned), else the full bundle."""
    version = plotly_js_version(full)
    partial = folder / f"plotly-cartesian-{version}.min.js"
    if version in pins and partial.is_file() and partial.stat().st_size < 8 * 2**20:
        if hashlib.sha256(partial.read_bytes()).hexdigest() == pins[version]:
            return partial
    return full


def bundle_name(source: Path, full: Path) -> str:
    """'cartesian' (plotly.js's 2-D build) or 'full', and the version: 'plotly-cartesian-4.1.1.min.js'."""
    build = "cartesian" if source != full else "full"
    return f"plotly-{build}-{plotly_js_version(source) or 'unknown'}.min.js"


@functools.cache
def lesson_bundle() -> tuple:
    """(the bundle's text, its name) for a lesson file, read once per process."""
    source = choose_bundle(FULL_BUNDLE, PARTIAL_FOLDER, PARTIAL_SHA256)
    return source.read_text(encoding="utf-8"), bundle_name(source, FULL_BUNDLE)
