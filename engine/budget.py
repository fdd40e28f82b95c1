"""What one request may cost on a shared server, in decoding steps x paths.

Every path a request decodes costs about one forward pass per step: a beam search counts each beam,
a soft decode two (its p·E product costs about as much as the output layer). Six Compare lanes of
1,024 tokens would be over 10,000 steps (a quarter of an hour on a CPU), and 8 beams x 1,024 tokens
minutes; 2,048 steps still took 7.7 min on a busy 2-core machine. So one request (one Compare, one
beam search, one KV cache view) runs at most DEFAULT_STEP_BUDGET steps over all its paths, and the
page says when it shortened the text. DECODESCOPE_COMPARE_STEPS sets another budget.
"""
from __future__ import annotations

import os

DEFAULT_STEP_BUDGET = 1024
SOFT_WIDTH = 2


def step_budget() -> int:
    """The server's budget: DECODESCOPE_COMPARE_STEPS when it is a whole number, else 1,024; at least 1."""
    try:
        return max(int(os.environ.get("DECODESCOPE_COMPARE_STEPS", DEFAULT_STEP_BUDGET)), 1)
    except ValueError:
        return DEFAULT_STEP_BUDGET


def tokens_within_budget(width: int, asked: int) -> int:
    """New tokens for each of `width` paths decoded together, so that all of them stay within the budget
    (at least one token)."""
    return max(1, min(asked, step_budget() // max(width, 1)))
