"""The bundled model's safetensors cache: checked on every load, rebuilt when damaged, never half-read.

Most tests run the bundled-model path of load_model on the tiny random Llama: its
de-quantising step returns the tiny model, and the cache lives in a temporary
DECODESCOPE_CACHE. The reference for "the model works" is the tiny model's own logits,
computed here. One test damages a COPY of the real cache (the real one is never touched).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import engine.model
from engine import load_model
from engine.model import MARKER, check_marker, write_marker
from tiny_models import tiny_llama

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def reference():
    """The tiny Llama's next-token logits for a fixed prompt, from the model built in memory."""
    lm = tiny_llama()
    ids = torch.tensor([lm.tokenizer("Greedy decoding picks the most likely token")["input_ids"]])
    with torch.no_grad():
        return ids, lm.model(input_ids=ids).logits


def works_like_the_tiny_model(lm, reference) -> bool:
    ids, logits = reference
    with torch.no_grad():
        return torch.allclose(lm.model(input_ids=ids).logits, logits, atol=1e-5)


def load_recording():
    messages = []
    lm = load_model(progress=lambda fraction, message: messages.append(message))
    return lm, messages


def test_the_first_load_writes_a_sealed_cache_and_the_next_reads_it(fake_bundled, reference):
    target, calls = fake_bundled
    first = load_model()
    assert calls == [1] and not first.from_cache and first.cache_rebuilt == ""
    assert check_marker(target) is True
    listed = (target / MARKER).read_text()
    for name in (WEIGHTS, "config.json", "tokenizer.json"):
        assert name in listed and f'"bytes": {(target / name).stat().st_size}' in listed

    second = load_model()
    assert calls == [1], "a whole cache was rebuilt"
    assert second.from_cache and second.cache_rebuilt == ""
    assert works_like_the_tiny_model(second, reference)


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def overwrite(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(data)


def flip_last_bit(path: Path) -> None:
    """Change the file's last weight a little (its lowest bit): the header and the size stay whole."""
    last = path.read_bytes()[-1]
    overwrite(path, path.stat().st_size - 1, bytes([last ^ 1]))


DAMAGE = {   # name -> (what is done to the cache folder, a word the reason must contain)
    "cut weights": (lambda d: cut(d / WEIGHTS), WEIGHTS),
    "emptied weights": (lambda d: (d / WEIGHTS).write_bytes(b""), WEIGHTS),
    "bad header": (lambda d: overwrite(d / WEIGHTS, 0, b"\xff" * 16), WEIGHTS),
    "random bytes over the weights": (
        lambda d: overwrite(d / WEIGHTS, 0, random.Random(0).randbytes((d / WEIGHTS).stat().st_size)), WEIGHTS),
    # the file still loads and gives finite numbers: only the checksum tells (the check runs beside the load)
    "one weight changed": (lambda d: flip_last_bit(d / WEIGHTS), WEIGHTS),
    "missing config.json": (lambda d: (d / "config.json").unlink(), "config.json"),
    "broken tokenizer.json": (lambda d: overwrite(d / "tokenizer.json", 0, b"{{{{"), "tokenizer.json"),
    "garbage marker": (lambda d: (d / MARKER).write_bytes(b"\x00\xffnot a list"), MARKER),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_cache_is_found_rebuilt_and_said(fake_bundled, reference, damage):
    target, calls = fake_bundled
    load_model()
    harm, word = DAMAGE[damage]
    harm(target)

    lm, messages = load_recording()
    assert calls == [1, 1], "the damaged cache was not rebuilt"
    assert word in lm.cache_rebuilt, lm.cache_rebuilt
    assert any("damaged" in m and word in m for m in messages), messages
    assert works_like_the_tiny_model(lm, reference)
    assert check_marker(target) is True            # whole again: the next load reads it
    again = load_model()
    assert again.from_cache and calls == [1, 1]


def test_weights_that_give_nan_are_found_by_the_probe(fake_bundled, reference):
    """A file whose checksum matches but whose numbers are NaN (written that way) still gets rebuilt."""
    from safetensors.torch import load_file, save_file

    target, calls = fake_bundled
    load_model()
    state = load_file(target / WEIGHTS)
    name = next(k for k in state if "embed_tokens" in k)
    state[name][:] = float("nan")
    save_file(state, str(target / WEIGHTS), metadata={"format": "pt"})
    write_marker(target)

    lm = load_model()
    assert calls == [1, 1] and "non-finite" in lm.cache_rebuilt
    assert works_like_the_tiny_model(lm, reference)


def marker_json(target: Path) -> dict:
    return json.loads((target / MARKER).read_text())


def rewrite_marker(target: Path, change) -> None:
    marker = marker_json(target)
    change(marker)
    (target / MARKER).write_text(json.dumps(marker))


def other_weights(target: Path) -> None:
    """Finite weights of another model where the cached ones were: a forward pass alone cannot tell."""
    from safetensors.torch import load_file, save_file

    state = load_file(target / WEIGHTS)
    torch.manual_seed(7)
    save_file({k: torch.randn_like(v) * 0.02 for k, v in state.items()}, str(target / WEIGHTS),
              metadata={"format": "pt"})


MARKERS = {   # name -> (what is done to the marker, words the reason must contain)
    "the word ok": (lambda d: (d / MARKER).write_text("ok\n"), "older or unknown form"),
    "no format number": (lambda d: rewrite_marker(d, lambda m: m.pop("format")), "older or unknown form"),
    "a later format": (lambda d: rewrite_marker(d, lambda m: m.update(format=99)), "older or unknown form"),
    "an empty list of files": (lambda d: rewrite_marker(d, lambda m: m.update(files={})), "lists no files"),
    "files as a list": (lambda d: rewrite_marker(d, lambda m: m.update(files=[WEIGHTS])), "lists no files"),
    "weights left out of the list": (lambda d: rewrite_marker(d, lambda m: m["files"].pop(WEIGHTS)),
                                     f"{WEIGHTS} is in the folder but not in"),
    "a size that is text": (lambda d: rewrite_marker(d, lambda m: m["files"][WEIGHTS].update(bytes="12")),
                            "malformed entry"),
    "a checksum that is not hex": (lambda d: rewrite_marker(d, lambda m: m["files"][WEIGHTS].update(sha256="z" * 64)),
                                   "malformed entry"),
    "a path out of the folder": (lambda d: rewrite_marker(d, lambda m: m["files"].update(
        {"../x": m["files"][WEIGHTS]})), "malformed entry"),
}


@pytest.mark.parametrize("case", sorted(MARKERS))
def test_a_marker_that_cannot_vouch_for_other_weights_gets_them_rebuilt(fake_bundled, reference, case):
    """Finite but wrong weights under a marker that cannot vouch for them: the probe passes them, so only
    the marker's check can find them; they are rebuilt with the usual note, never decoded."""
    target, calls = fake_bundled
    load_model()
    other_weights(target)
    harm, words = MARKERS[case]
    harm(target)

    lm, messages = load_recording()
    assert calls == [1, 1], "weights under an untrustworthy marker were loaded"
    assert words in lm.cache_rebuilt, lm.cache_rebuilt
    assert any("damaged" in m for m in messages), messages
    assert works_like_the_tiny_model(lm, reference)
    assert check_marker(target) is True and marker_json(target)["format"] == 2


def test_an_old_style_cache_with_garbage_weights_is_rebuilt(fake_bundled, reference):
    """No checksum to compare: the forward-pass probe finds the random weights (the header is intact)."""
    target, calls = fake_bundled
    load_model()
    (target / MARKER).write_text("ok\n")
    header = 8 + int.from_bytes((target / WEIGHTS).read_bytes()[:8], "little")
    body = (target / WEIGHTS).stat().st_size - header
    overwrite(target / WEIGHTS, header, random.Random(1).randbytes(body))
    lm = load_model()
    assert calls == [1, 1] and lm.cache_rebuilt
    assert works_like_the_tiny_model(lm, reference)


def test_partial_folders_left_by_dead_writers_are_removed(fake_bundled):
    target, _ = fake_bundled
    target.parent.mkdir(parents=True)
    dead = target.parent / f"{target.name}.partial-999999999-abc"          # above any pid_max
    live = target.parent / f"{target.name}.partial-{os.getpid()}-def"      # this process: a write in progress
    old = target.parent / f"{target.name}.partial-xyz"                     # no pid, two hours old
    for folder in (dead, live, old):
        folder.mkdir()
        (folder / WEIGHTS).write_bytes(b"\0" * 1000)
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    load_model()
    assert not dead.exists() and not old.exists()
    assert live.exists()


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
import safetensors.torch
import engine.model
from tiny_models import tiny_llama

def save_then_die(state, path, metadata=None):
    Path(path).write_bytes(b"half a file")
    os.kill(os.getpid(), signal.SIGKILL)

safetensors.torch.save_file = save_then_die
lm = tiny_llama()
engine.model.cache.write_cache(lm.model, lm.tokenizer, Path({target!r}))
"""


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_a_write_killed_by_sigkill_leaves_a_partial_that_the_next_load_removes(fake_bundled, reference):
    target, calls = fake_bundled
    code = KILLED_WRITER.format(target=str(target))
    # the child imports this checkout's engine and the test helpers, as pytest does (pyproject's pythonpath)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == -9, result.stderr[-2000:]
    partials = list(target.parent.glob("*.partial-*"))
    assert len(partials) == 1 and not target.exists()

    lm = load_model()
    assert not partials[0].exists()
    assert [p.name for p in target.parent.iterdir()] == [target.name]
    assert calls == [1] and works_like_the_tiny_model(lm, reference)


# ---- the real bundled model: a damaged COPY of its cache --------------------------------------------
@pytest.mark.bundled
def test_the_real_cache_damaged_by_64_mb_of_random_bytes_is_rebuilt_quietly(bundled, tmp_path, monkeypatch, capfd):
    """64 MB of random bytes in the middle of the weights (same size): found by the checksum, rebuilt from
    the GGUF file with our progress lines only (the GGUF reader's own bar stays off), and the result
    decodes like the bundled model loaded from the real cache."""
    real = engine.model.bundled_cache_dir()
    assert (real / MARKER).is_file()
    monkeypatch.setenv("DECODESCOPE_CACHE", str(tmp_path))
    copy = engine.model.bundled_cache_dir()
    assert copy.parent == tmp_path
    shutil.copytree(real, copy)
    if not check_marker(copy):
        write_marker(copy)
    size = (copy / WEIGHTS).stat().st_size
    overwrite(copy / WEIGHTS, size // 2, random.Random(2).randbytes(64 * 2**20))
    assert (copy / WEIGHTS).stat().st_size == size

    capfd.readouterr()
    lm, messages = load_recording()
    err = capfd.readouterr().err
    assert WEIGHTS in lm.cache_rebuilt and "checksum" in lm.cache_rebuilt
    assert "de-quantizing" not in err.lower() and "it/s" not in err, err[-2000:]
    assert any("first run" in m for m in messages)
    ids = torch.tensor([bundled.tokenizer("The capital of France is")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(lm.model(input_ids=ids).logits, bundled.model(input_ids=ids).logits, atol=1e-4)
    assert check_marker(copy) is True
