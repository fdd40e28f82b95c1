"""Many rows that continue one prompt, over a single copy of the prompt's keys and values.

A batch of continuations (the lanes of Compare, the rows of Whole answers' tree and its samples, the beams of a
search) all attend to the same prompt. transformers' own way to batch them (`batch_repeat_interleave`) copies the
prompt's keys and values once per row: 128 samples of a 600-token prompt on SmolLM2 held 3.6 GB of copies. Here
each layer keeps the prompt's keys and values once, as the prompt's forward pass left them ([1, heads, P, dim]),
and each row only its own tokens ([rows, heads, t, dim]). A layer's attention still needs one tensor of every
key per row, so `update` joins the two for that layer alone (`expand` makes no copy, `cat` one, freed when the
layer is done): what stays in memory is the prompt once plus each row's own tokens, and what a pass holds at a
time is one layer's join, which `rows_per_pass` keeps under a budget by splitting the rows.

The keys and values a layer hands to attention are exactly the ones a repeated cache would hand it, in the same
order, so every row computes what it computes over a copied cache. Sliding-window layers (Gemma 3) keep the
prompt's last window as the model's own cache keeps it and hand attention the part its mask shows.
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

PASS_BYTES = 256 * 2**20      # the most one layer's joined keys and values may take in one pass, all rows together


class SharedPrefixLayer(DynamicLayer):
    """One full-attention layer: the prompt's keys and values once, each row's own tokens after them."""

    def __init__(self, prefix_keys: torch.Tensor, prefix_values: torch.Tensor, own_keys: torch.Tensor,
                 own_values: torch.Tensor):
        super().__init__()
        self.prefix_keys, self.prefix_values = prefix_keys, prefix_values      # [1, kv heads, P, dim], shared
        self.keys, self.values = own_keys, own_values                          # [rows, kv heads, t, dim]
        self.dtype, self.device = own_keys.dtype, own_keys.device
        self.is_initialized = True

    @property
    def prefix_length(self) -> int:
        return self.prefix_keys.shape[-2]

    def update(self, key_states, value_states, *args, **kwargs):
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        return self._joined(self.prefix_keys, self.keys), self._joined(self.prefix_values, self.values)

    @staticmethod
    def _joined(prefix: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
        return torch.cat([prefix.expand(own.shape[0], -1, -1, -1), own], dim=-2)

    def get_seq_length(self) -> int:
        return self.prefix_length + self.keys.shape[-2]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove and abs(tokens_to_remove) > self.keys.shape[-2]:
            raise ValueError("a shared prompt's keys and values cannot be cropped")
        super().crop(tokens_to_remove)


class SharedSlidingLayer(DynamicSlidingWindowLayer):
    """One sliding-window layer: the prompt's last window once (as the prompt's pass left it), each row's own
    tokens after it; attention gets the last `window - 1` keys before the new ones, as the model's cache gives."""

    def __init__(self, prefix_keys, prefix_values, own_keys, own_values, sliding_window: int, seen: int):
        super().__init__(sliding_window=sliding_window)
        self.prefix_keys, self.prefix_values = prefix_keys, prefix_values
        self.keys, self.values = own_keys, own_values
        self.dtype, self.device = own_keys.dtype, own_keys.device
        self._sliding_window_tensor = self._sliding_window_tensor.to(self.device)
        self.cumulative_length = seen + own_keys.shape[-2]      # positions this layer has seen, the prompt's too
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        before = self.cumulative_length
        self.cumulative_length += key_states.shape[-2]
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        visible = min(before, self.sliding_window - 1) + key_states.shape[-2]
        return (self._visible(self.prefix_keys, self.keys, visible),
                self._visible(self.prefix_values, self.values, visible))

    @staticmethod
    def _visible(prefix: torch.Tensor, own: torch.Tensor, visible: int) -> torch.Tensor:
        if own.shape[-2] >= visible:
            return own[:, :, -visible:]
        need = visible - own.shape[-2]
        return torch.cat([prefix[:, :, -need:].expand(own.shape[0], -1, -1, -1), own], dim=-2)

    def crop(self, tokens_to_remove: int) -> None:
        raise ValueError("a shared prompt's sliding window cannot be cropped")


def shareable(past) -> bool:
    """Whether a prompt's cache is one these layers can share: transformers' DynamicCache of full or
    sliding-window layers, one row (quantised, static, offloaded and other caches are copied as before)."""
    if type(past) is not DynamicCache or not past.layers or getattr(past, "offloading", False):
        return False
    if any(type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer) for layer in past.layers):
        return False
    return all(layer.keys is not None and layer.keys.shape[0] == 1 for layer in past.layers)


def shared_rows(past, rows: int, own: list | None = None) -> Cache:
    """A cache for `rows` rows that continue the prompt whose one-row cache is `past` (see `shareable`), none of
    its keys or values copied. own: per layer (keys, values) [rows, kv heads, t, dim] each row holds already
    after the prompt (Whole answers' kept rows); none by default."""
    layers = []
    for n, layer in enumerate(past.layers):
        if own is not None:
            keys, values = own[n]
        else:
            empty = (rows, layer.keys.shape[1], 0, layer.keys.shape[-1])
            keys, values = layer.keys.new_empty(empty), layer.values.new_empty(empty)
        if type(layer) is DynamicSlidingWindowLayer:
            layers.append(SharedSlidingLayer(layer.keys, layer.values, keys, values, layer.sliding_window,
                                             layer.cumulative_length))
        else:
            layers.append(SharedPrefixLayer(layer.keys, layer.values, keys, values))
    return Cache(layers=layers)


def rows_per_pass(lm, kv_length: int, query_length: int = 1, budget: int | None = None) -> int:
    """How many rows one pass may take so that one layer's joined keys and values, `kv_length` positions a row,
    stay within `budget` bytes. A pass of several new tokens a row repeats each key head for its query heads
    (transformers' repeat_kv), so it counts them too. At least one row."""
    facts, budget = lm.facts, PASS_BYTES if budget is None else budget
    per_position = 2 * facts.kv_heads * facts.head_dim * facts.dtype_bytes
    if query_length > 1:
        per_position *= 1 + max(facts.heads // max(facts.kv_heads, 1), 1)
    return max(1, budget // max(per_position * max(kv_length, 1), 1))


def row_chunks(count: int, size: int) -> list:
    """[(start, stop)] cutting `count` rows into runs of at most `size`."""
    return [(start, min(start + size, count)) for start in range(0, count, max(size, 1))]
