"""Which numbers a server returns: the model's raw log-probabilities (before its sampler chain) or processed
ones (after temperature, top-k, top-p, min-p). Every figure of a served trace reads them as the model's
distribution, so a trace says which they are and how that was learnt:

  - llama.cpp's own server (`owned_by: "llamacpp"`): asked. Its `post_sampling_probs` (false by default)
    switches to probabilities after its chain; every request sends it false, so the numbers are raw;
  - llama-cpp-python (`owned_by: "me"`): named. Its completions turn the context's logits into
    log-probabilities (llama_cpp/llama.py, `Llama.logits_to_logprobs(self._scores)`) before any sampler
    runs, and it has no switch;
  - vLLM: probed. `--logprobs-mode` is set for the whole server and no answer reports it, so one
    one-token request with settings under which the two readings cannot agree tells: top-k 1 at
    temperature 1 leaves one token, so a processed answer gives it log-probability 0 and every other
    listed token nothing (vLLM writes -9999 for minus infinity), while a raw answer lists the model's own
    spread. A server that returns logits (raw_logits, processed_logits) is refused at connect;
  - any other OpenAI-compatible server: probed the same way, but only a processed answer is conclusive
    there (such a server may ignore top_k), so a raw-looking one leaves the numbers unknown.
"""
from __future__ import annotations

import math

RAW, PROCESSED, UNKNOWN = "raw", "processed", "unknown"
NUMBERS = (RAW, PROCESSED, UNKNOWN)
ASKED, PROBED, NAMED = "asked", "probed", "named"
LEARNT = (ASKED, PROBED, NAMED, UNKNOWN)        # UNKNOWN: a server made here and never connected
LOGITS = "logits"                   # a probe's verdict only: such a server is refused

PROBE_PROMPT = "The"                # a next token the model is unsure of: raw numbers spread visibly
PROBE_LISTED = 5
PROBE_SETTINGS = dict(max_tokens=1, logprobs=PROBE_LISTED, temperature=1.0, top_k=1, top_p=1.0, min_p=0.0,
                      seed=0)
REMOVED = -1000.0                   # no raw log-probability is this low; a token a chain removed is (-9999)
ROUNDING = 1e-6


def learnt_without_probe(kind: str) -> tuple[str, str] | None:
    """(numbers, how) for a server kind whose numbers are known without a probe; None where one is needed."""
    if kind == "llama.cpp":
        return RAW, ASKED
    if kind == "llama-cpp-python":
        return RAW, NAMED
    return None


def read_probe(values: list[float], conclusive_raw: bool = True) -> str:
    """The verdict on a probe's listed numbers (best first), sent with PROBE_SETTINGS: LOGITS when they cannot
    be log-probabilities (one above 0, or more than all the mass), PROCESSED when the top token holds all of
    it and the rest were removed, else RAW (UNKNOWN where a raw-looking answer is not conclusive)."""
    if not values:
        return UNKNOWN
    if any(v > ROUNDING for v in values) or sum(math.exp(v) for v in values) > 1.0 + 1e-3:
        return LOGITS
    top, rest = max(values), sorted(values, reverse=True)[1:]
    if top >= -ROUNDING and all(v <= REMOVED for v in rest):
        return PROCESSED
    return RAW if conclusive_raw else UNKNOWN


def describe(served: dict) -> str:
    """One line for the CLI: which numbers a served trace holds and how that was learnt."""
    numbers, how = served.get("logprobs"), served.get("logprobs_from")
    said = {RAW: "raw log-probabilities, before the server's sampler chain",
            PROCESSED: "PROCESSED log-probabilities, after the server's sampler chain (temperature, top-k, "
                       "top-p, min-p): not the model's own distribution",
            }.get(numbers, "log-probabilities of unknown kind (raw or after the server's sampler chain)")
    why = {ASKED: "asked for in every request (post_sampling_probs false)",
           PROBED: "found by a one-token probe (top-k 1 at temperature 1)",
           NAMED: "what this server always returns"}.get(how, "not recorded in this trace")
    return f"numbers: {said}; {why}"
