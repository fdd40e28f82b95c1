"""transformers' own `generate`, the reference every decode-parity test compares against."""
from __future__ import annotations

import torch


def generate_ids(lm, prompt_ids, **kwargs):
    out = lm.model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                            pad_token_id=lm.model.generation_config.pad_token_id,
                            eos_token_id=list(lm.eos_token_ids), **kwargs)
    return out


def strip_generated(row, prompt_len, pad, eos_ids):
    """Generated part of one generate() row, cut after the first EOS (the rest is padding)."""
    ids = row[prompt_len:].tolist()
    for i, tok in enumerate(ids):
        if tok in eos_ids:
            return ids[: i + 1]
    return ids
