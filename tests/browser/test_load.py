"""A classroom at once: eight browser sessions, each a 12-token sampled decode on the shared model.

The correctness half of bench/load_classroom.py: every session finishes without an
exception, shows its own prompt and exactly what the engine samples for its prompt
and seed, and the two sessions with the same seed and settings show identical text.
The model is loaded once: the server's memory with eight sessions stays within 300 MB
of its memory with one. Timings are printed (run with -s), never asserted.
"""
from __future__ import annotations

import pytest

from bench.load_classroom import classroom, print_figures

pytestmark = pytest.mark.browser


def test_eight_sessions_at_once_each_see_their_own_result(browser, server, bundled):
    figures = classroom(browser, server.url, server.pid, bundled, sessions=8, tokens=12)
    print()
    print_figures(figures)
    assert figures["finished"] == 8
    assert figures["problems"] == []
    assert figures["rss_all_sessions_mb"] - figures["rss_one_session_mb"] < 300
