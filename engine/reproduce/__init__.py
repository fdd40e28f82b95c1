"""Same prompt, temperature 0, another answer: why a server's greedy decode is not reproducible, measured.

A server batches a request with others, so a row's logits come out of matrix products, norms and attention that
reduce in another order at another batch size, padding or prefill split; the logits move in their last bits, and
the argmax changes only where the top two are nearly tied. This family decodes one prompt alone and inside
batches, compares every step's logits with the alone run, flags the steps where a flip was possible, and offers
a batch-invariant switch. No Streamlit; the page, the CLI and the benchmarks use it.

The modules, in the order the data flows:
  settings.py   what a study runs (batch sizes, fill, prefill, dtype, invariant, verify), checked whole
  batches.py    the prompt's row among fillers of the same length, or of other lengths left-padded
  precision.py  the model in the run's dtype (a bfloat16 copy made once, the loaded model untouched)
  invariant.py  the batch-invariant switch: every linear layer computed one row at a time
  runs.py       one run: prefill whole / chunked / stepwise, one-token steps or K-token verify passes, greedy or
                seeded Gumbel-max sampling; the prompt's row's logits at every step
  compare.py    a run against the reference: max |Δ| and where, the top-2 margin, fragile (margin <= 2 max |Δ|),
                the first divergence, the logits' SHA-256
  study.py      every run of a study, the closest call, the what-if fork there, and the JSON
  served.py     N identical temperature-0 requests to a server at several concurrencies: distinct completions,
                where they part and the top-2 log-probability margin there
  cli.py        `python -m engine reproduce ...`
"""
from __future__ import annotations

import importlib

# loaded on first use (PEP 562): `python -m engine reproduce` checks its flags before PyTorch is imported
_HOMES = {
    ".settings": ("StudySettings", "parse_batch_sizes", "parse_prefill"),
    ".invariant": ("batch_invariant",),
    ".runs": ("Picker", "Run", "RunSpec", "decode_run"),
    ".compare": ("Comparison", "StepCheck", "compare", "is_fragile", "logits_sha256", "top_two"),
    ".study": ("Study", "WhatIf", "run_study"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = list(_HOME_OF)


def __getattr__(name: str):
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.reproduce' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
