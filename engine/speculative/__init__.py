"""Speculative decoding: a cheap draft proposes K tokens, the target checks them all in one forward pass.

drafts.py: the three drafts (early exit, prompt lookup, a second model); verify.py: the acceptance rule
u <= p(x) / q(x) and the residual norm(max(0, p - q)); decoder.py: the runner, one round per step();
proof.py: many draws of one next token at once, to show the rule keeps the target's distribution;
summary.py: what the rounds of a run add up to (acceptance per position against its formula).
"""
from .decoder import SpeculativeDecoder
from .drafts import make_draft

__all__ = ["SpeculativeDecoder", "make_draft"]
