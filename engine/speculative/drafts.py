"""The drafts: who proposes the K tokens a round checks, and with which distribution q.

- early exit: the first L layers of the target itself, read through its final norm and unembedding
  (the logit lens's reading; transformers' `assistant_early_exit`);
- prompt lookup: the tokens that followed the last n-gram the last time it occurred in the context
  (transformers' `prompt_lookup_num_tokens`); it has no distribution, so its q is one-hot;
- a second model with the target's vocabulary (transformers' `assistant_model`).

A model draft keeps its own KV cache across rounds and cuts it back to the tokens the target kept.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import torch

from ..config import draft_spec
from ..errors import ConfigError
from ..model import LoadedModel
from engine.decoding.runner import forward_kwargs

Choose = Callable[[torch.Tensor, list], int]    # (raw logits [V], context ids) -> the drafted token


@dataclass(frozen=True)
class Proposal:
    ids: list                        # the drafted tokens (a prompt lookup may find fewer than K, or none)
    logits: torch.Tensor | None      # [len(ids), V] the draft's raw logits; None: the draft has no distribution
    passes: int                      # forward passes the draft spent


class Draft:
    """Proposes tokens after a context; `keep(n)` says the target kept the context's first n tokens."""
    kind = ""

    def propose(self, context: list, k: int, choose: Choose) -> Proposal:
        raise NotImplementedError

    def keep(self, length: int) -> None:
        pass


class ModelDraft(Draft):
    """A causal LM drafting one token per forward pass, with its own cache."""

    def __init__(self, model, kind: str):
        self.model, self.kind = model, kind
        self._past, self._cached = None, 0
        self._fwd = forward_kwargs(model)
        self._device = model.get_input_embeddings().weight.device

    @torch.inference_mode()
    def propose(self, context: list, k: int, choose: Choose) -> Proposal:
        ids, rows, ctx = [], [], list(context)
        feed = ctx[self._cached:]
        for _ in range(k):
            out = self.model(input_ids=torch.tensor([feed], device=self._device), past_key_values=self._past,
                             use_cache=True, **self._fwd)
            if self._past is None and hasattr(out.past_key_values, "activate_past_recording"):
                out.past_key_values.activate_past_recording()     # so a sliding-window cache can be cut back
            self._past, self._cached = out.past_key_values, self._cached + len(feed)
            row = out.logits[0, -1].to("cpu", torch.float32)
            token = choose(row, ctx)
            ids.append(token)
            rows.append(row)
            ctx.append(token)
            feed = [token]
        return Proposal(ids=ids, logits=torch.stack(rows) if rows else None, passes=len(ids))

    def keep(self, length: int) -> None:
        if self._past is not None and self._cached > length:
            self._past.crop(length - self._cached)        # a negative count: remove that many positions
            self._cached = length


class PromptLookup(Draft):
    """The n-gram draft: find the context's last n tokens earlier in the context (n from `ngram` down to 1,
    the first occurrence), and propose the tokens that followed it. No model, no passes."""
    kind = "prompt-lookup"

    def __init__(self, ngram: int, eos_ids: tuple = ()):
        self.ngram, self.eos_ids = ngram, set(eos_ids)

    def propose(self, context: list, k: int, choose: Choose) -> Proposal:
        for n in range(min(self.ngram, len(context) - 1), 0, -1):
            tail = context[-n:]
            for start in range(len(context) - n):          # windows before the tail itself
                if context[start:start + n] == tail:
                    follow = context[start + n:start + n + k]
                    ends = [i for i, t in enumerate(follow) if t in self.eos_ids]
                    follow = follow[:ends[0]] if ends else follow     # never draft past an end-of-text
                    if follow:
                        return Proposal(ids=follow, logits=None, passes=0)
        return Proposal(ids=[], logits=None, passes=0)


def early_exit_view(model, layers: int):
    """The same model cut after `layers` decoder layers: shares every weight, runs the first `layers` blocks,
    then the final norm and the unembedding. A shallow copy with its own short layer list, so the shared model
    (used by other sessions at the same time) is never changed, unlike setting num_hidden_layers in place."""
    base_name = model.base_model_prefix
    base = getattr(model, base_name)
    stack_name = next((n for n in ("layers", "h") if isinstance(getattr(base, n, None), torch.nn.ModuleList)), None)
    if stack_name is None:
        raise ConfigError("draft", f"draft: early exit does not know where {type(model).__name__} keeps its layers")
    config = copy.copy(base.config)
    config.num_hidden_layers = layers
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = config.layer_types[:layers]
    short = copy.copy(base)
    short._modules = dict(base._modules)
    short._modules[stack_name] = torch.nn.ModuleList(list(getattr(base, stack_name))[:layers])
    short.config = config
    view = copy.copy(model)
    view._modules = dict(model._modules)
    view._modules[base_name] = short
    view.config = config
    return view


def make_draft(lm: LoadedModel, spec: str, draft_lm: LoadedModel | None = None) -> Draft:
    """The draft a spec names: 'early-exit:L', 'prompt-lookup:N' or 'model:NAME' (draft_lm is that model, loaded
    by the caller). Raises ConfigError naming 'draft' for a layer past the last or another vocabulary."""
    kind, value = draft_spec(spec)
    if kind == "early-exit":
        layers = lm.facts.layers
        if value >= layers:
            raise ConfigError("draft", f"draft: early exit after layer {value} is not before the last layer; "
                                       f"{lm.name} has {layers} layers, so choose 1 to {layers - 1}",
                              "draft_layer_last", layer=value, model=lm.name, layers=layers, most=layers - 1)
        return ModelDraft(early_exit_view(lm.model, value), kind)
    if kind == "prompt-lookup":
        return PromptLookup(value, lm.eos_token_ids)
    if draft_lm is None:
        raise ConfigError("draft", f"draft: the model '{value[:80]}' is not loaded", "draft_not_loaded",
                          model=value[:80])
    check_vocabulary(lm, draft_lm)
    return ModelDraft(draft_lm.model, kind)


def check_vocabulary(lm: LoadedModel, draft_lm: LoadedModel) -> None:
    """A draft model must speak in the target's token ids: the same vocabulary size and the same ids for the
    same pieces (checked on the tokenizers' vocabularies)."""
    if draft_lm.facts.vocab_size != lm.facts.vocab_size:
        raise ConfigError("draft", f"draft: {draft_lm.name} has a vocabulary of {draft_lm.facts.vocab_size:,} "
                                   f"tokens and {lm.name} one of {lm.facts.vocab_size:,}; a draft must share the "
                                   "target's vocabulary", "draft_vocab_size", draft=draft_lm.name,
                          n=f"{draft_lm.facts.vocab_size:,}", model=lm.name, m=f"{lm.facts.vocab_size:,}")
    mine, theirs = lm.tokenizer.get_vocab(), draft_lm.tokenizer.get_vocab()
    if mine != theirs:
        differ = sum(1 for piece, token in theirs.items() if mine.get(piece) != token)
        raise ConfigError("draft", f"draft: {draft_lm.name} numbers {differ:,} tokens differently from {lm.name}; "
                                   "a draft must share the target's vocabulary", "draft_numbering",
                          draft=draft_lm.name, n=f"{differ:,}", model=lm.name)
