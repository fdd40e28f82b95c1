"""The model in the precision a run asks for: the loaded model itself when it already is, else a copy made once.

bfloat16 keeps 8 bits of mantissa against float32's 24, so the same change of summation order moves a logit by
about 10^4 times more, and near-ties (even exact ties) appear. The copy is a separate model, so the loaded one,
which other pages share, is never changed.
"""
from __future__ import annotations

import dataclasses
import threading

import torch

from ..model import LoadedModel, take_turns
from ..model.loaded import model_facts

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_copies: dict = {}                # (id of the loaded model, dtype) -> (the loaded model, its copy)
_making = threading.Lock()


def dtype_name(lm: LoadedModel) -> str:
    return str(next(lm.model.parameters()).dtype).replace("torch.", "")


def in_dtype(lm: LoadedModel, dtype: str) -> LoadedModel:
    """`lm` when its weights are in `dtype`, else a copy in `dtype` on the same device (kept for the next call)."""
    if dtype_name(lm) == dtype:
        return lm
    key = (id(lm.model), dtype)
    with _making:
        held = _copies.get(key)
        if held is None or held[0] is not lm.model:
            for old in [k for k, (model, _) in _copies.items() if model is lm.model or k[0] == key[0]]:
                del _copies[old]
            held = (lm.model, _copy(lm, DTYPES[dtype]))
            _copies[key] = held
    return held[1]


def _copy(lm: LoadedModel, dtype: torch.dtype) -> LoadedModel:
    """A new model of the same class and configuration holding `lm`'s weights in `dtype` (tied weights stay tied)."""
    model = lm.model
    with torch.device("meta"):
        clone = type(model)._from_config(model.config, dtype=dtype)
    state = {name: value.to(dtype) if value.is_floating_point() else value
             for name, value in model.state_dict().items()}
    clone.load_state_dict(state, strict=False, assign=True)
    if getattr(model.config, "tie_word_embeddings", False):
        clone.tie_weights()
    for name, buffer in model.named_buffers():       # rotary frequencies and the like stay as the model keeps them
        owner, _, leaf = name.rpartition(".")
        target = clone.get_submodule(owner) if owner else clone
        target._buffers[leaf] = buffer.clone()
    clone.generation_config = model.generation_config
    clone.eval()
    take_turns(clone)
    for parameter in clone.parameters():
        parameter.requires_grad_(False)
    return dataclasses.replace(lm, model=clone, facts=model_facts(clone, lm.tokenizer, lm.name),
                               _embedding_norms=None, _unit_embeddings_half=None, _embeddings_cpu=None)
