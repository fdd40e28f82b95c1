"""A long prompt read in parts of PREFILL_TOKENS: each part one forward pass over the cache the parts before it
left, which is what one pass over the whole prompt computes (up to float rounding). On a CPU it is also faster:
SmolLM2 read 4,000 tokens in 27.7 s in parts of 512 and in 52.9 s in one pass (load 5-7 on two cores), and each
part holds its activations alone. Between two parts a caller can report progress and be stopped.

A page waiting for a decode does not see its prompt being read (the first step comes only after it), so a thread
can also watch every prompt it reads, wherever the read happens (a Step-by-step opening, a replay, Compare's
lanes, a beam search): `with watching_prompts(on_part): ...` calls on_part(tokens read, prompt length) before the first
part and after each part of a prompt longer than one part, in this thread only."""
from __future__ import annotations

import contextlib
import threading

PREFILL_TOKENS = 512

_local = threading.local()


@contextlib.contextmanager
def watching_prompts(on_part):
    """Within the block, on_part(tokens read, prompt length) before and after each part of every prompt this
    thread reads in more than one part (a shorter prompt is one pass: nothing to watch). The innermost block
    watches."""
    outer = getattr(_local, "on_part", None)
    _local.on_part = on_part
    try:
        yield
    finally:
        _local.on_part = outer


def read_in_parts(model, input_ids, forward_kwargs: dict, should_stop=None, on_part=None):
    """The model's output after `input_ids` [rows, P] (its cache holding all of them), or None when
    should_stop() said so between two parts. on_part(tokens read, P) after each part."""
    total, past, out = input_ids.shape[1], None, None
    watcher = getattr(_local, "on_part", None) if total > PREFILL_TOKENS else None
    if watcher is not None:
        watcher(0, total)
    for start in range(0, total, PREFILL_TOKENS):
        if start and should_stop is not None and should_stop():
            return None
        out = model(input_ids=input_ids[:, start:start + PREFILL_TOKENS], past_key_values=past, use_cache=True,
                    **forward_kwargs)
        past = out.past_key_values
        read = min(start + PREFILL_TOKENS, total)
        if on_part is not None:
            on_part(read, total)
        if watcher is not None:
            watcher(read, total)
    return out
