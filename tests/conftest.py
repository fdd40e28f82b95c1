"""Shared fixtures: tiny random models (see tiny_models.py), a stand-in for the bundled model's load path, the bundled
models themselves, and servers (served_fixtures.py)."""
from __future__ import annotations

import pytest
import torch

from served_fixtures import llama_server, stub_server  # noqa: F401  (tests/served, tests/ui, tests/browser)
import scheduling
import tiers
from tiers import bundled_only_where_marked, processes_only_where_marked  # noqa: F401  (autouse)
from tiny_models import ROOT, tiny_gpt2, tiny_llama, tiny_tokenizer  # noqa: F401
from engine.model.loading import cpu_threads

# Each test process does its forward passes with the threads the app gives one pass (half the cores): the tests
# run in three processes on this machine's two cores, and a pass split over threads that wait for each other
# took 44 ms for a tiny model's forward pass instead of 1.4 ms.
torch.set_num_threads(cpu_threads())

@pytest.fixture(scope="session")
def llama():
    return tiny_llama()


@pytest.fixture(scope="session")
def gpt2():
    return tiny_gpt2()


@pytest.fixture(params=["llama", "gpt2"], scope="session")
def tiny(request):
    return tiny_llama() if request.param == "llama" else tiny_gpt2()


@pytest.fixture(scope="session")
def tiny_llama_folder(tmp_path_factory):
    """(the tiny Llama, the folder it is saved in): load_model, the CLI and the app read it like any local model."""
    lm = tiny_llama()
    folder = tmp_path_factory.mktemp("tiny-llama")
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return lm, str(folder)


@pytest.fixture
def fake_bundled(monkeypatch, tmp_path):
    """(cache folder, de-quantise calls): the bundled path of load_model on the tiny Llama."""
    import engine.model.loading

    monkeypatch.setenv("DECODESCOPE_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "cache" / "tiny-bundled-v1-1234"
    monkeypatch.setattr(engine.model.loading, "bundled_cache_dir", lambda which=None: target)
    calls = []

    def dequantise(report, which=None):
        calls.append(1)
        lm = tiny_llama()
        return lm.model, lm.tokenizer

    monkeypatch.setattr(engine.model.loading, "dequantise", dequantise)
    return target, calls


@pytest.fixture(scope="session")
def bundled():
    """The real default model (reads the safetensors cache; the first run de-quantises for ~30 s)."""
    from engine import load_model

    return load_model()


@pytest.fixture(scope="session")
def gemma():
    """The bundled Gemma 3 270M (reads its cache; the first run joins and de-quantises it, minutes)."""
    from engine import load_model

    return load_model("gemma3-270m")


def pytest_configure(config):
    tiers.register(config)


@pytest.hookimpl(tryfirst=True, optionalhook=True)      # before xdist's own; a hook only where xdist is installed
def pytest_xdist_make_scheduler(config, log):
    return scheduling.make_scheduler(config, log)


@pytest.hookimpl(tryfirst=True)      # before -m deselects by these markers
def pytest_collection_modifyitems(config, items):
    tiers.mark(items)


def pytest_report_collectionfinish(config, start_path, items):
    return tiers.summary(items)
