"""load_model: a bundled model (from its checked cache, or de-quantised once) or any Hugging Face causal LM,
on the device and in the precision asked for. Remote code never runs."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import torch

from ..config import DEVICES, DTYPES, check_model_name
from ..errors import ModelLoadError
from .bundled import SMOLLM2, Bundled, dequantise, bundled_cache_dir, bundled_named, first_line
from .cache import MARKER, CacheDamaged, read_cache, write_cache, clean_stale_partials
from .loaded import LoadedModel, Progress


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
    if name is not None:
        check_model_name(name)
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
            lm = read_cache(target, which.name)
            lm.from_cache = True
            return lm
        except CacheDamaged as exc:
            damaged = str(exc)
            report(0.0, f"the cached copy in {target} is damaged ({damaged}); rebuilding it from the bundled file")
            shutil.rmtree(target, ignore_errors=True)
    model, tokenizer = dequantise(report, which)
    report(0.92, "writing a float32 copy to the cache so later starts take a few seconds")
    write_cache(model, tokenizer, target)
    lm = LoadedModel.from_parts(model, tokenizer, which.name)
    lm.cache_rebuilt = damaged
    return lm


def _load_named(name: str, report: Progress, device: str = "cpu", dtype: torch.dtype = torch.float32,
                auto_map: bool = False) -> LoadedModel:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    path = Path(name).expanduser()
    if path.exists() and not path.is_dir():
        raise ModelLoadError(f"'{name}' is a file, not a model folder: give the folder that holds config.json "
                             "and the weights", "model_is_file", name=name)
    if path.exists() and not (path / "config.json").is_file():
        raise ModelLoadError(f"'{name}' is a folder but not a model: it has no config.json", "model_no_config",
                             name=name)
    report(0.1, f"reading the configuration of {name}")
    try:
        config = _from_pretrained(AutoConfig, name)
    except ModelLoadError:
        raise
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"model '{name}' was not found locally and could not be reached on the Hugging Face Hub "
            f"({first_line(exc)}); the bundled default needs no network", "model_not_found", name=name,
            detail=first_line(exc)) from None
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    architectures = getattr(config, "architectures", None) or []
    causal_heads = [a for a in architectures if a.endswith(("ForCausalLM", "LMHeadModel"))]
    if (config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or getattr(config, "is_encoder_decoder", False)
            or (architectures and not causal_heads)):
        raise ModelLoadError(f"'{name}' is a {config.model_type} model, not a causal language model; "
                             "DecodeScope needs a model that predicts the next token", "model_not_causal",
                             name=name, kind=str(config.model_type))
    report(0.3, f"loading the weights of {name} onto {device} in {str(dtype).replace('torch.', '')}")
    # on a GPU asked for by 'auto', accelerate spreads a model that does not fit one device over the
    # others (and the CPU); a device named outright gets the whole model
    device_map = "auto" if auto_map and device == "cuda" else {"": device}
    try:
        tokenizer = _from_pretrained(AutoTokenizer, name)
        model = _from_pretrained(AutoModelForCausalLM, name, dtype=dtype, device_map=device_map)
    except (MemoryError, torch.OutOfMemoryError):
        raise ModelLoadError(f"out of memory while loading '{name}'; try a smaller model", "model_oom",
                             name=name) from None
    except RuntimeError as exc:
        if "memory" in str(exc).lower():
            raise ModelLoadError(f"out of memory while loading '{name}'; try a smaller model", "model_oom",
                                 name=name) from None
        raise ModelLoadError(f"could not load '{name}': {first_line(exc)}", "model_unloadable", name=name,
                             detail=first_line(exc)) from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load '{name}': {first_line(exc)}", "model_unloadable", name=name,
                             detail=first_line(exc)) from None
    return LoadedModel.from_parts(model, tokenizer, name)


def _from_pretrained(cls, name: str, **kwargs):
    """Local files first; the hub only when the user is online (never remote code)."""
    try:
        return cls.from_pretrained(name, trust_remote_code=False, local_files_only=True, **kwargs)
    except OSError:
        if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
            raise
        return cls.from_pretrained(name, trust_remote_code=False, **kwargs)
