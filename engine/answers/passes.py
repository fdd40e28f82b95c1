"""Forward passes for whole answers: the prompt once, then many continuations of it in one batch.

The prompt's keys and values are computed once (`PromptCache`), a long prompt in parts (engine.decoding.prefill:
each part a pass that can report progress and be stopped), and shared by every row that continues it, never
copied per row (engine.decoding.shared_prefix). The tree keeps, for every prefix it expanded, the keys and
values of that prefix's last token (`expand`): a batch then runs one new token per row, each row's own part of the cache
gathered from the rows of its ancestors by one index. Prefixes of different lengths are padded on the left of
their own part; an attention mask hides the padding and the position ids skip it, so each row computes exactly
what a forward pass over prompt + its own continuation computes (tests/engine/test_answers.py checks it).
`logits_after` runs whole continuations instead (no kept rows): for a model whose sliding window the prompt and
the depth outgrow. Rows go through the model in runs small enough that one layer's keys and values for a run
stay within engine.decoding.shared_prefix.PASS_BYTES, so a long prompt under many rows is a few passes, not gigabytes.
"""
from __future__ import annotations

import copy

import torch

from engine.decoding.prefill import read_in_parts
from engine.decoding.runner import forward_kwargs
from engine.decoding.shared_prefix import row_chunks, rows_per_pass, shareable, shared_rows


class PromptCache:
    """The prompt's forward pass, kept: its next-token logits and its KV cache, shared by every batch.
    should_stop(): polled between the parts of a long prompt (then `stopped` is True and nothing else may run);
    on_part(tokens read, prompt length): after each part."""

    @torch.inference_mode()
    def __init__(self, lm, prompt_ids: list, should_stop=None, on_part=None):
        self.lm, self.prompt_ids = lm, list(prompt_ids)
        self._fwd = forward_kwargs(lm.model)
        self.passes = 0
        self._slots: dict = {}            # expanded node id -> its row in self._kept
        self._kept = None                 # [layers, 2, capacity, kv heads, head dim]: each kept token's K and V
        ids = torch.tensor([self.prompt_ids], device=lm.device)

        def part(done: int, total: int) -> None:
            self.passes += 1
            if on_part is not None:
                on_part(done, total)
        out = read_in_parts(lm.model, ids, self._fwd, should_stop, part)
        self.stopped = out is None
        if self.stopped:
            return
        self.logits = out.logits[:, -1].to("cpu", torch.float32)     # [1, V]: the root's next token
        self._past = out.past_key_values
        self._shared = shareable(self._past)

    def fits_window(self, depth: int) -> bool:
        """Whether prompt + depth stays inside the model's sliding window, if it has one (kept rows are put
        together as a plain cache; a window the sequence outgrows would need the model's own cropping)."""
        config = self.lm.model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        window = getattr(text, "sliding_window", None)
        return not window or len(self.prompt_ids) + depth + 1 <= window

    def rows_cache(self, rows: int, own: list | None = None):
        """A cache for `rows` continuations of the prompt: the prompt's keys and values shared, not copied
        (a cache of a kind that cannot be shared is copied per row, as transformers does)."""
        if self._shared:
            return shared_rows(self._past, rows, own)
        past = copy.deepcopy(self._past)
        if rows > 1:
            past.batch_repeat_interleave(rows)
        if own is not None:
            for layer, (keys, values) in zip(past.layers, own):
                layer.keys = torch.cat([layer.keys, keys], dim=-2)
                layer.values = torch.cat([layer.values, values], dim=-2)
        return past

    def run_size(self, longest: int, query: int = 1) -> int:
        """Rows per model call when each row attends to the prompt and `longest` more positions."""
        return rows_per_pass(self.lm, len(self.prompt_ids) + longest, query)

    @torch.inference_mode()
    def expand(self, rows: list, capacity: int) -> torch.Tensor:
        """[len(rows), V] float32 logits after each row's prefix, one new token per row. rows: (node id, its
        last token, the ids of its ancestors below the root, in order), every ancestor expanded before."""
        longest = max(len(r[2]) for r in rows)
        logits = []
        for start, stop in row_chunks(len(rows), self.run_size(longest + 1)):
            logits.append(self._expand_run(rows[start:stop], longest, capacity))
        return torch.cat(logits)

    def _expand_run(self, rows: list, longest: int, capacity: int) -> torch.Tensor:
        b, prompt = len(rows), len(self.prompt_ids)
        index = torch.zeros(b, longest, dtype=torch.long)
        real = torch.zeros(b, longest + 1, dtype=torch.long)
        real[:, -1] = 1
        for i, (_, _, ancestors) in enumerate(rows):
            if ancestors:
                index[i, longest - len(ancestors):] = torch.tensor([self._slots[a] for a in ancestors])
                real[i, longest - len(ancestors):longest] = 1
        device = self.lm.device
        own = None
        if longest:               # each layer's rows gathered on their own: [b, kv heads, A, dim]
            where = index.to(device)
            own = [(layer[0][where].transpose(1, 2).contiguous(), layer[1][where].transpose(1, 2).contiguous())
                   for layer in self._kept]
        mask = torch.cat([torch.ones(b, prompt, dtype=torch.long), real], dim=1)
        positions = torch.tensor([[prompt + len(r[2])] for r in rows])
        tokens = torch.tensor([[r[1]] for r in rows])
        out = self.lm.model(input_ids=tokens.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), past_key_values=self.rows_cache(b, own),
                            use_cache=True, **self._fwd)
        self.passes += 1
        layers = out.past_key_values.layers
        if self._kept is None:
            first = layers[0].keys
            self._kept = torch.empty((len(layers), 2, capacity, first.shape[1], first.shape[-1]), dtype=first.dtype,
                                     device=first.device)
        slots = list(range(len(self._slots), len(self._slots) + b))
        for n, layer in enumerate(layers):     # the new token's K and V: each row's last position
            self._kept[n, 0, slots[0]:slots[-1] + 1] = layer.keys[:, :, -1]
            self._kept[n, 1, slots[0]:slots[-1] + 1] = layer.values[:, :, -1]
        for (node_id, _, _), slot in zip(rows, slots):
            self._slots[node_id] = slot
        return out.logits[:, -1].to("cpu", torch.float32)

    @torch.inference_mode()
    def logits_after(self, paths: list) -> torch.Tensor:
        """[len(paths), V] float32: the next-token logits after prompt + each path (each of >= 1 tokens)."""
        longest = max(len(p) for p in paths)
        size = self.run_size(longest, query=longest)
        return torch.cat([self._after_run(paths[start:stop], longest)
                          for start, stop in row_chunks(len(paths), size)])

    def _after_run(self, paths: list, longest: int) -> torch.Tensor:
        rows, prompt = len(paths), len(self.prompt_ids)
        ids = torch.zeros(rows, longest, dtype=torch.long)
        real = torch.zeros(rows, longest, dtype=torch.long)
        for i, path in enumerate(paths):
            ids[i, longest - len(path):] = torch.tensor(path)
            real[i, longest - len(path):] = 1
        mask = torch.cat([torch.ones(rows, prompt, dtype=torch.long), real], dim=1)
        positions = (prompt + real.cumsum(1) - 1).clamp_min(prompt)     # padding takes the first real position
        device = self.lm.device
        out = self.lm.model(input_ids=ids.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), past_key_values=self.rows_cache(rows), use_cache=True,
                            **self._fwd)
        self.passes += 1
        return out.logits[:, -1].to("cpu", torch.float32)

    @torch.inference_mode()
    def logits_along(self, token_ids: list) -> torch.Tensor:
        """[len(token_ids) + 1, V] float32: the next-token logits after the prompt, then after each token of
        `token_ids` in turn (one pass over the tokens, on the prompt's shared cache)."""
        if not token_ids:
            return self.logits.clone()
        device = self.lm.device
        out = self.lm.model(input_ids=torch.tensor([list(token_ids)], device=device),
                            past_key_values=self.rows_cache(1), use_cache=True)
        self.passes += 1
        return torch.cat([self.logits, out.logits[0].to("cpu", torch.float32)])

    @torch.inference_mode()
    def step_rows(self, rows: int, depth: int):
        """A stepper for `rows` continuations that grow one token at a time together (the samples), at most
        `depth` tokens: call it with [rows] next token ids, get [rows, V] logits. Rows run in groups, each
        with its own cache over the shared prompt, so one pass never joins more than the budget allows."""
        runs = [(start, stop, self.rows_cache(stop - start)) for start, stop in
                row_chunks(rows, self.run_size(depth + 1))]
        device, fwd = self.lm.device, self._fwd

        @torch.inference_mode()
        def step(tokens: list) -> torch.Tensor:
            out = []
            for start, stop, past in runs:
                logits = self.lm.model(input_ids=torch.tensor(tokens[start:stop], device=device)[:, None],
                                       past_key_values=past, use_cache=True, **fwd).logits
                self.passes += 1
                out.append(logits[:, -1].to("cpu", torch.float32))
            return torch.cat(out)
        return step
