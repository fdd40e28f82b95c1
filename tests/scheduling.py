"""How `make test` hands its tests to its processes (pytest-xdist, `--dist loadgroup`): each browser test file
goes whole to one process, and so do the tests that name Gemma; every other test goes on its own; all in the
order of the collection (tests/browser/conftest.py puts the browser files first, the longest first), each
process taking the next when it is almost done.

A browser file is kept whole because its module-scoped fixtures (a page pool, traces decoded on the bundled model,
a fresh server) are built once, and its pages share the process's app server and Chromium. The tests on the
bundled Gemma share a process so that one process loads it (2.3 GB, 35 s on a busy machine), not each.
xdist's own groups (`xdist_group` marks) cannot say this here: with pytest 9.2 the group xdist writes into a
test's id no longer reaches its scheduler, so the marks were silently ignored and each browser file was spread
over all processes. The order is the collection's, not xdist's default (the scopes with the most tests first),
which would start the longest browser files, of one test each, after all the others.
"""
from __future__ import annotations

BROWSER = "tests/browser/"
GEMMA = "gemma"          # in a test's id: it runs on the bundled Gemma (or on a tiny Gemma 3, cheap to keep with them)


def scope_of(nodeid: str) -> str:
    """The unit a process takes at once: a browser test's file, the Gemma tests, any other test alone."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(BROWSER):
        return path
    return GEMMA if GEMMA in nodeid.lower() else nodeid


def make_scheduler(config, log):
    """The scheduler for `--dist loadgroup`; None for any other distribution (xdist's own then)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class BrowserFilesWhole(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False
    return BrowserFilesWhole(config, log)
