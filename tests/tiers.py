"""Test tiers: each test is marked by what it uses, so a developer can run the fast tier after every change.

| marker  | the test uses                                                        |
|---------|----------------------------------------------------------------------|
| tiny    | tiny random models built in the test, in this process, nothing else  |
| apptest | Streamlit's AppTest (the app's pages run in this process)            |
| cli     | the command line, in this process (run_cli) or as a subprocess       |
| process | a fresh Python interpreter (the CLI, the app server, a bench import) |
| served  | a real llama.cpp server                                              |
| bundled | a bundled model (SmolLM2 or Gemma 3 270M; `gemma` marks the latter)  |
| browser | the real app in headless Chromium                                    |

`make check` runs `not (browser or served or bundled or process)`. A test is marked bundled when it asks for the
`bundled` or `gemma` fixture or says `pytest.mark.bundled` itself (an AppTest test on the default model);
a test that is not marked bundled and still loads a bundled model fails with a line saying so, so the
fast tier can never quietly grow a bundled-model load. In the same way a test that starts a fresh Python
interpreter says `pytest.mark.process`: each one pays PyTorch's and transformers' imports again (8-10 s of CPU
on this 2-core machine), and the fast tier runs the same code in this process (`run_cli`, `cli_in_process`).
"""
from __future__ import annotations

import os

import pytest

QUICK = os.environ.get("DECODESCOPE_TESTS") == "check"     # `make check` sets it

TIERS = {
    "tiny": "tiny random models only, in this process (the fast tier's core)",
    "apptest": "drives the app's pages with Streamlit's AppTest",
    "cli": "runs the command line (in this process or as a subprocess)",
    "process": "starts a fresh Python interpreter (the CLI, the app server, an import check)",
    "served": "talks to a real llama.cpp server",
    "bundled": "runs on a bundled model (SmolLM2, or Gemma 3 270M)",
    "gemma": "runs on the bundled Gemma 3 270M (262,144-token vocabulary; slow first load)",
    "browser": "drives the real app in headless Chromium",
}
SLOW = ("browser", "served", "bundled")
OUTSIDE_CHECK = (*SLOW, "process")       # what `make check` leaves to `make test`


def examples(full: int) -> int:
    """A property's number of examples: all of them in `make test`, a sixth (at least 10) in `make check`,
    which the full run then covers again."""
    return max(full // 6, 10) if QUICK else full


def spread(values, keep: int) -> list:
    """The cases of a test that tries every page (or every fault) the same way: all of them in `make test`,
    `keep` of them spread over the list in `make check` (the first always among them), which the full run
    then covers again. For tests whose cases differ only in where the same check is made."""
    values = list(values)
    if not QUICK or keep >= len(values):
        return values
    step = len(values) / keep
    return [values[int(i * step)] for i in range(keep)]


def register(config) -> None:
    for name, meaning in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


def tiers_of(item) -> set:
    """The tiers an item belongs to, from the fixtures it asks for and what its module uses."""
    names = set(getattr(item, "fixturenames", ()))
    module = getattr(item, "module", None)
    found = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
    if "browser" in item.path.relative_to(item.config.rootpath).parts[:2]:
        found.add("browser")
    if names & {"bundled", "gemma"}:
        found.add("bundled")
    if "gemma" in names:
        found.add("gemma")
    if "llama_server" in names:
        found.add("served")
    if module is not None:
        if "AppTest" in vars(module):
            found.add("apptest")
        if {"subprocess", "run_cli", "cli_in_process", "decode_process"} & set(vars(module)):
            found.add("cli")
    if not found:
        found.add("tiny")
    return found


def mark(items) -> None:
    for item in items:
        for name in tiers_of(item):
            item.add_marker(getattr(pytest.mark, name))


def is_slow(item) -> bool:
    return any(item.get_closest_marker(name) for name in SLOW)


@pytest.fixture(autouse=True)
def bundled_only_where_marked(request, monkeypatch):
    """A test outside the slow tiers that reaches for a bundled model fails, naming the fix. The load
    is refused with the engine's own error (a page shows it as a message) and the test fails after it."""
    if is_slow(request.node):
        yield
        return
    import engine.model.loading
    from engine.errors import ModelLoadError

    reached = []

    def refuse(*args, **kwargs):
        reached.append(True)
        raise ModelLoadError("a bundled model is not loaded in this test tier")

    # Every load of a real bundled model starts by asking where its cache is; a test that stands in a
    # small model for the bundled one (tests/engine/test_model_cache.py) replaces this function itself.
    monkeypatch.setattr(engine.model.loading, "bundled_cache_dir", refuse)
    yield
    if reached:
        pytest.fail(f"{request.node.nodeid} loads a bundled model but is not marked bundled: ask for the "
                    "`bundled` fixture or add pytest.mark.bundled", pytrace=False)


@pytest.fixture(autouse=True)
def processes_only_where_marked(request, monkeypatch):
    """A test outside `make test`'s own tiers that starts a Python interpreter fails, naming the fix: the
    start is refused (the test then fails on it) and the line below says to mark the test `process`."""
    if any(request.node.get_closest_marker(name) for name in OUTSIDE_CHECK):
        yield
        return
    import subprocess
    import sys

    started = []
    real = subprocess.Popen

    class Refused(real):
        def __init__(self, args, *rest, **kwargs):
            program = args[0] if isinstance(args, list | tuple) and args else args
            if str(program) == sys.executable:
                started.append(args)
                raise OSError("a Python interpreter is not started in this test tier")
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Refused)
    yield
    if started:
        pytest.fail(f"{request.node.nodeid} starts a Python interpreter but is not marked process: add "
                    "pytest.mark.process (make check leaves it to make test)", pytrace=False)


def summary(items) -> str:
    """One line under the collection report: how many collected tests each tier holds."""
    counts = {name: sum(1 for item in items if item.get_closest_marker(name)) for name in TIERS}
    return "tiers: " + ", ".join(f"{name} {count}" for name, count in counts.items() if count)
