"""Forward passes for whole answers: the prompt once, then many short continuations of it in one batch.

The prompt's keys and values are computed once (`PromptCache`); each batch copies them for its rows and
runs only the continuations' tokens. Continuations of different lengths are padded on the left, so every
row's last position is real and the model returns one position of logits per row (`logits_to_keep=1`);
an attention mask hides the padding and the position ids skip it, so each row computes exactly what a
forward pass over prompt + its own continuation computes (tests/engine/test_answers.py checks it).
"""
from __future__ import annotations

import copy

import torch

from ..runner import forward_kwargs


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
