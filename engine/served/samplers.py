"""The engine-specific sampler settings a served decode sends, in each server's spelling, and those it ignores.

- llama.cpp's server (`/completion`, and its `/v1/completions`, which reads the same fields) takes them all:
  repeat_last_n, presence_penalty, frequency_penalty, dry_*, top_n_sigma (-1 off), xtc_*, typical_p,
  dynatemp_*, mirostat, mirostat_tau, mirostat_eta, and a custom chain as the list `samplers`.
- llama-cpp-python's server (0.3) takes mirostat (as mirostat_mode, tau, eta); its mirostat skips the
  temperature that llama.cpp applies first (at temperature 1 the two agree). It accepts presence_penalty,
  frequency_penalty and repeat_penalty but they change nothing: its sampler is never shown the tokens, so the
  penalty window stays empty (measured: the same seeds draw the same tokens with penalties 2 as with none).
  Its request has no typical_p, DRY, top-nσ, XTC, dynamic temperature or sampler list. All of these are
  ignored there: named, and not sent.
- vLLM's OpenAI-compatible server takes presence_penalty and frequency_penalty (on the tokens it generated),
  with repetition_penalty, top_k, top_p, min_p and temperature; nothing else of these.
Every setting a server takes is sent explicitly, at its neutral value too: a server started with other
defaults would otherwise shape the run silently.
"""
from __future__ import annotations

import json

from ..config import DecodeConfig

# DecodeConfig field -> the field llama.cpp's server reads
LLAMA_CPP = {"penalty_last_n": "repeat_last_n", "presence_penalty": "presence_penalty",
             "frequency_penalty": "frequency_penalty", "dry_multiplier": "dry_multiplier", "dry_base": "dry_base",
             "dry_allowed_length": "dry_allowed_length", "dry_penalty_last_n": "dry_penalty_last_n",
             "dry_sequence_breakers": "dry_sequence_breakers", "top_n_sigma": "top_n_sigma",
             "xtc_probability": "xtc_probability", "xtc_threshold": "xtc_threshold", "typical_p": "typical_p",
             "dynatemp_range": "dynatemp_range", "dynatemp_exponent": "dynatemp_exponent", "mirostat": "mirostat",
             "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta", "samplers": "samplers"}
LLAMA_CPP_PYTHON = {"mirostat": "mirostat_mode", "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta"}
OPENAI = {"presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty"}   # vLLM's too
TRANSFORMERS_ONLY = ("epsilon_cutoff", "eta_cutoff", "top_h", "no_repeat_ngram_size")     # no server takes these
# the stages that shape a sampled draw only: a greedy decode asks for none of them
SAMPLED_ONLY = {"typical_p": 1.0, "top_n_sigma": 0.0, "xtc_probability": 0.0, "dynatemp_range": 0.0, "mirostat": 0,
                "samplers": ""}
FIELDS = {"llama.cpp": LLAMA_CPP, "llama-cpp-python": LLAMA_CPP_PYTHON, "vllm": OPENAI, "openai": OPENAI}
# the settings that belong to a stage: ignored only when the stage is on and the server lacks the stage
STAGE_OF = {"dry_base": "dry_multiplier", "dry_allowed_length": "dry_multiplier",
            "dry_penalty_last_n": "dry_multiplier", "dry_sequence_breakers": "dry_multiplier",
            "xtc_threshold": "xtc_probability", "dynatemp_exponent": "dynatemp_range", "mirostat_tau": "mirostat",
            "mirostat_eta": "mirostat", "penalty_last_n": "presence_penalty"}


def server_fields(kind: str, config: DecodeConfig, sampling: bool = True) -> dict:
    """The engine-specific settings of `config` that a server of `kind` takes, in its spelling. Not sampling
    (greedy), the stages that shape only a draw are sent off: llama.cpp's chain still runs them before its
    temperature 0, and XTC there would set the top token aside."""
    if not sampling:
        config = config.replace(**SAMPLED_ONLY)
    fields = {}
    for name, field in FIELDS.get(kind, OPENAI).items():
        value = getattr(config, name)
        if name == "top_n_sigma" and value == 0:
            value = -1.0                                   # llama.cpp's off
        elif name == "dry_sequence_breakers":
            value = json.loads(value)
        elif name == "samplers":
            if not value:
                continue                                   # its own default chain
            value = [part.strip() for part in value.split(";")]
        fields[field] = value
    return fields


def ignored(kind: str, config: DecodeConfig) -> list:
    """The settings of `config` that are on (away from neutral) and that a server of `kind` does not take, by
    their DecodeConfig names; a window or a detail of a stage counts when its stage is on."""
    neutral, takes = DecodeConfig(), FIELDS.get(kind, OPENAI)
    names = [f for f in (*TRANSFORMERS_ONLY, *LLAMA_CPP) if f not in takes]
    out = ["repetition_penalty"] if kind == "llama-cpp-python" and config.repetition_penalty != 1.0 else []
    for name in names:
        owner = STAGE_OF.get(name)
        if owner is not None:
            on = getattr(config, owner) != getattr(neutral, owner) or (
                owner == "presence_penalty" and (config.frequency_penalty or config.repetition_penalty != 1.0))
            if on and getattr(config, name) != getattr(neutral, name):
                out.append(name)
        elif getattr(config, name) != getattr(neutral, name):
            out.append(name)
    return out


def ignored_note(kind: str, config: DecodeConfig) -> str:
    """One line naming the settings this server ignored ('' when it took them all), for the command line."""
    names = ignored(kind, config)
    if not names:
        return ""
    flags = ", ".join("--" + name.replace("_", "-") for name in names)
    return f"note: a {str(kind)[:40]} server does not take {flags}: they did not shape this run"
