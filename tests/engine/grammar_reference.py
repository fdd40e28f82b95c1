"""The reference for constrained decoding: llguidance's own matcher walked by hand over the model's logits.

It shares nothing with engine/grammar/constrain.py: its own llguidance tokenizer and matcher, a full forward pass over
the whole sequence at every step (no KV cache), llguidance's own numpy helpers to fill and apply the mask.
"""
from __future__ import annotations

import llguidance
import llguidance.hf
import llguidance.numpy
import numpy as np
import torch


def reference_greedy(lm, prompt_ids, grammar, max_new_tokens):
    """(ids, masks, Z_t) from llguidance's matcher walked by hand over full forward passes."""
    tokenizer = llguidance.hf.from_tokenizer(lm.tokenizer, n_vocab=lm.facts.vocab_size,
                                            eos_token=list(lm.eos_token_ids))
    matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    bitmask = llguidance.numpy.allocate_token_bitmask(1, lm.facts.vocab_size)
    ids, masks, feasible = [], [], []
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = lm.model(torch.tensor([prompt_ids + ids])).logits[0, -1].float().numpy()
        llguidance.numpy.fill_next_token_bitmask(matcher, bitmask)
        masked = logits[None].copy()
        llguidance.numpy.apply_token_bitmask_inplace(masked, bitmask)
        allowed = np.isfinite(masked[0])
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        masks.append(allowed)
        feasible.append(float(probs[allowed].sum()))
        token = int(masked[0].argmax())
        ids.append(token)
        if token in lm.eos_token_ids:
            break
        assert matcher.consume_token(token)
    return ids, masks, feasible
