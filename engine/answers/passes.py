"""Forward passes for whole answers: the prompt once, then many continuations of it in one batch.

The prompt's keys and values are computed once (`PromptCache`). The tree keeps, for every prefix it
expanded, the keys and values of that prefix's last token (`expand`): a batch then runs one new token per
row, over a cache put together from the prompt's rows and the rows of each prefix's ancestors, gathered by
one index. Prefixes of different lengths are padded on the left of their own part; an attention mask hides
the padding and the position ids skip it, so each row computes exactly what a forward pass over prompt +
its own continuation computes (tests/engine/test_answers.py checks it). `logits_after` runs whole
continuations instead (no kept rows): for a model whose sliding window the prompt and the depth outgrow.
"""
from __future__ import annotations

import copy

import torch
from transformers import DynamicCache

from engine.decoding.runner import forward_kwargs


class PromptCache:
    """The prompt's forward pass, kept: its next-token logits and its KV cache, copied for every batch."""

    @torch.inference_mode()
    def __init__(self, lm, prompt_ids: list):
        self.lm, self.prompt_ids = lm, list(prompt_ids)
        out = lm.model(input_ids=torch.tensor([self.prompt_ids], device=lm.device), use_cache=True,
                       **forward_kwargs(lm.model))
        self.logits = out.logits[:, -1].to("cpu", torch.float32)     # [1, V]: the root's next token
        self._past = out.past_key_values
        self._fwd = forward_kwargs(lm.model)
        self.passes = 1
        self._slots: dict = {}            # expanded node id -> its row in self._kept
        self._kept = None                 # [capacity, layers, 2, kv heads, head dim]: each kept token's K and V

    def fits_window(self, depth: int) -> bool:
        """Whether prompt + depth stays inside the model's sliding window, if it has one (kept rows are put
        together as a plain cache; a window the sequence outgrows would need the model's own cropping)."""
        config = self.lm.model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        window = getattr(text, "sliding_window", None)
        return not window or len(self.prompt_ids) + depth + 1 <= window

    @torch.inference_mode()
    def expand(self, rows: list, capacity: int) -> torch.Tensor:
        """[len(rows), V] float32 logits after each row's prefix, one new token per row. rows: (node id, its
        last token, the ids of its ancestors below the root, in order), every ancestor expanded before."""
        prompt_layers = self._past.layers
        b, longest, prompt = len(rows), max(len(r[2]) for r in rows), len(self.prompt_ids)
        index = torch.zeros(b, longest, dtype=torch.long)
        real = torch.zeros(b, longest + 1, dtype=torch.long)
        real[:, -1] = 1
        for i, (_, _, ancestors) in enumerate(rows):
            if ancestors:
                index[i, longest - len(ancestors):] = torch.tensor([self._slots[a] for a in ancestors])
                real[i, longest - len(ancestors):longest] = 1
        device = self.lm.device
        past = DynamicCache()
        gathered = self._kept[index.to(device)] if longest else None      # [b, A, layers, 2, kvh, d]
        for n, layer in enumerate(prompt_layers):
            keys = layer.keys.expand(b, -1, -1, -1)
            values = layer.values.expand(b, -1, -1, -1)
            if gathered is not None:
                keys = torch.cat([keys, gathered[:, :, n, 0].transpose(1, 2)], dim=2)
                values = torch.cat([values, gathered[:, :, n, 1].transpose(1, 2)], dim=2)
            past.update(keys.contiguous(), values.contiguous(), n)
        mask = torch.cat([torch.ones(b, prompt, dtype=torch.long), real], dim=1)
        positions = torch.tensor([[prompt + len(r[2])] for r in rows])
        tokens = torch.tensor([[r[1]] for r in rows])
        out = self.lm.model(input_ids=tokens.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), past_key_values=past, use_cache=True, **self._fwd)
        self.passes += 1
        new = torch.stack([torch.stack([layer.keys[:, :, -1], layer.values[:, :, -1]], dim=1)
                           for layer in out.past_key_values.layers], dim=1)           # [b, layers, 2, kvh, d]
        if self._kept is None:
            self._kept = torch.empty((capacity, *new.shape[1:]), dtype=new.dtype, device=new.device)
        for node_id, _, _ in rows:
            self._slots[node_id] = len(self._slots)
        self._kept[len(self._slots) - b:len(self._slots)] = new
        return out.logits[:, -1].to("cpu", torch.float32)

    @torch.inference_mode()
    def logits_after(self, paths: list) -> torch.Tensor:
        """[len(paths), V] float32: the next-token logits after prompt + each path (each of >= 1 tokens)."""
        rows, longest, prompt = len(paths), max(len(p) for p in paths), len(self.prompt_ids)
        ids = torch.zeros(rows, longest, dtype=torch.long)
        real = torch.zeros(rows, longest, dtype=torch.long)
        for i, path in enumerate(paths):
            ids[i, longest - len(path):] = torch.tensor(path)
            real[i, longest - len(path):] = 1
        mask = torch.cat([torch.ones(rows, prompt, dtype=torch.long), real], dim=1)
        positions = (prompt + real.cumsum(1) - 1).clamp_min(prompt)     # padding takes the first real position
        past = copy.deepcopy(self._past)
        if rows > 1:
            past.batch_repeat_interleave(rows)
        device = self.lm.device
        out = self.lm.model(input_ids=ids.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), past_key_values=past, use_cache=True, **self._fwd)
        self.passes += 1
        return out.logits[:, -1].to("cpu", torch.float32)

    @torch.inference_mode()
    def step_rows(self, rows: int):
        """A stepper for `rows` continuations that grow one token at a time together (the samples): call it
        with [rows] next token ids, get [rows, V] logits."""
        past = copy.deepcopy(self._past)
        if rows > 1:
            past.batch_repeat_interleave(rows)
        device, fwd = self.lm.device, self._fwd

        @torch.inference_mode()
        def step(tokens: list) -> torch.Tensor:
            out = self.lm.model(input_ids=torch.tensor(tokens, device=device)[:, None], past_key_values=past,
                                use_cache=True, **fwd)
            self.passes += 1
            return out.logits[:, -1].to("cpu", torch.float32)
        return step
