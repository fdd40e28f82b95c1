"""The bundled model's float32 copy on disk: written to a temporary folder and renamed into place, so a
killed write is never read; its COMPLETE marker holds a format number and every file's size and SHA-256,
and each read checks them and runs one forward pass, so a damaged copy is rebuilt instead of giving
tracebacks, NaN or, worse, finite numbers from the wrong weights. A marker that could not vouch for the
folder (an older form, an empty list) is a damaged cache too."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .bundled import CACHE_LAYOUT, DEFAULT_MODEL, first_line
from .loaded import LoadedModel

MARKER = "COMPLETE"           # written last: the sizes and SHA-256 of every other file
MARKER_FORMAT = 2             # 1 was the bare word "ok"; a marker of any other format is not trusted
PARTIAL = ".partial-"         # <cache name>.partial-<pid>-<random>: a write in progress
STALE_PARTIAL_S = 3600        # a partial folder this old is left over, whoever wrote it
PROBE_TEXT = "The capital of France is"


class CacheDamaged(Exception):
    """The cached copy cannot be trusted; the message says why. It is rebuilt, never shown as a failure."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def write_marker(folder: Path) -> None:
    """Write COMPLETE: every file's size and SHA-256, so a cut, emptied or overwritten file is found."""
    files = {p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)}
             for p in sorted(folder.iterdir()) if p.is_file() and p.name != MARKER}
    tmp = folder / (MARKER + ".tmp")
    tmp.write_text(json.dumps({"format": MARKER_FORMAT, "layout": CACHE_LAYOUT, "files": files}, indent=1) + "\n")
    os.replace(tmp, folder / MARKER)


def _listed_files(text: str) -> dict:
    """name -> (bytes, sha256) from a marker's text; CacheDamaged for anything but this version's whole form.
    An older form (the word "ok", or a marker without a format number) lists nothing to check against, and
    a marker whose file list is empty would vouch for any folder: both are a damaged cache."""
    try:
        marker = json.loads(text)
    except (ValueError, RecursionError):
        marker = None
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT:
        raise CacheDamaged(f"its {MARKER} marker is in an older or unknown form")
    if marker.get("layout") != CACHE_LAYOUT:
        raise CacheDamaged(f"its {MARKER} marker is for another cache layout")
    files = marker.get("files")
    if not isinstance(files, dict) or not files:
        raise CacheDamaged(f"its {MARKER} marker lists no files")
    listed = {}
    for name, entry in files.items():
        size = entry.get("bytes") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if (not name or "/" in name or name in (".", "..", MARKER) or isinstance(size, bool)
                or not isinstance(size, int) or size < 0 or not isinstance(digest, str)
                or len(digest) != 64 or digest.strip("0123456789abcdef")):
            raise CacheDamaged(f"its {MARKER} marker has a malformed entry for {name[:80]!r}")
        listed[name] = (size, digest)
    return listed


def check_marker(folder: Path) -> bool:
    """Raise CacheDamaged unless COMPLETE is this version's marker and the folder holds exactly the files it
    lists, each of the size and SHA-256 written with it. Returns True when the folder is whole."""
    try:
        text = (folder / MARKER).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CacheDamaged(f"its {MARKER} marker cannot be read: {exc}") from None
    listed = _listed_files(text)
    present = {p.name for p in folder.iterdir() if p.name != MARKER and p.is_file()}
    for name in sorted(listed):
        if name not in present or not (folder / name).is_file():
            raise CacheDamaged(f"{name} is missing")
    unlisted = sorted(present - set(listed))
    if unlisted:
        raise CacheDamaged(f"{unlisted[0][:80]} is in the folder but not in its {MARKER} marker")
    for name, (size, _digest) in listed.items():
        if (folder / name).stat().st_size != size:
            raise CacheDamaged(f"{name} is {(folder / name).stat().st_size:,} bytes; {size:,} were written")
    for name, (_size, digest) in listed.items():
        if _sha256(folder / name) != digest:
            raise CacheDamaged(f"{name} does not match the checksum written with it")
    return True


def probe(lm: LoadedModel) -> None:
    """Raise CacheDamaged unless one forward pass on a fixed prompt gives finite logits."""
    ids = lm.tokenizer(PROBE_TEXT)["input_ids"]
    if not ids:
        raise CacheDamaged("its tokenizer turns a plain sentence into no tokens")
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([ids])).logits[0, -1]
    if not torch.isfinite(logits).all():
        raise CacheDamaged("its weights give non-finite logits (NaN or infinity)")


def read_cache(folder: Path, name: str = DEFAULT_MODEL) -> LoadedModel:
    """The model from a cache folder, after checking its files and one forward pass."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The files are hashed beside the load, not before it: hashing releases the GIL, so it takes a second core
    # while transformers imports its modules (seconds of Python on a first load); nothing loaded is used, or
    # returned, before the check has passed, and a damaged file is named by the check rather than by the load.
    with ThreadPoolExecutor(1, thread_name_prefix="cache-check") as pool:
        checked = pool.submit(check_marker, folder)
        try:
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(folder)
            lm = LoadedModel.from_parts(model, tokenizer, name)
        except Exception as exc:    # noqa: BLE001 - whatever a damaged file raises, the answer is to rebuild
            checked.result()
            raise CacheDamaged(f"it cannot be read ({type(exc).__name__}: {first_line(exc)})") from None
        checked.result()
    probe(lm)
    return lm


def clean_stale_partials(folder: Path) -> None:
    """Remove cache folders left half-written by a killed process (its pid is gone, or it is an hour old)."""
    if not folder.is_dir():
        return
    for path in folder.glob(f"*{PARTIAL}*"):
        try:
            age = time.time() - path.stat().st_mtime
        except OSError:
            continue
        pid = path.name.split(PARTIAL, 1)[1].split("-", 1)[0]
        if age > STALE_PARTIAL_S or not (pid.isdigit() and _alive(int(pid))):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    return True


def write_cache(model, tokenizer, target: Path) -> None:
    """Write config + tokenizer + safetensors + COMPLETE into a temp folder, then rename it into place."""
    from safetensors.torch import save_file

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}{PARTIAL}{os.getpid()}-", dir=target.parent))
    try:
        model.config.save_pretrained(tmp)
        if model.generation_config is not None:
            model.generation_config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)   # tied to the input embeddings
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        write_marker(tmp)
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)   # caching is an optimisation; the model is loaded
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


