"""KV-cache accounting: what the real cache holds, and what a shared-prefix cache would hold.

`cache_size` reads the real cache tensors. `paged_layout` is the accounting of a
paged cache in the style of vLLM: sequences are cut into blocks of 16 tokens; a full
block whose whole prefix is identical in several beams is stored once with a
reference count; each beam's last, partly filled block is its own.
"""
from __future__ import annotations

from dataclasses import dataclass

BLOCK_SIZE = 16


def cache_size(past) -> tuple[int, int, int]:
    """(batch rows, tokens per row, bytes) of a transformers cache, read off its tensors. Rows that share one
    copy of their prompt (engine.decoding.shared_prefix) count it in each row, as a cache of their own would hold it."""
    if past is None:
        return 0, 0, 0
    layers = getattr(past, "layers", None)
    total = 0
    batch = tokens = 0
    if layers:
        for layer in layers:
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if t is None:
                    continue
                length = t.shape[-2] + _shared_length(layer, name)
                if length and t.shape[0]:
                    total += t.shape[0] * t.shape[1] * length * t.shape[-1] * t.element_size()
                    batch, tokens = t.shape[0], length
    else:  # legacy tuple of (key, value) per layer
        for k, v in past:
            total += k.numel() * k.element_size() + v.numel() * v.element_size()
            batch, tokens = k.shape[0], k.shape[-2]
    return batch, tokens, total


def _shared_length(layer, name: str) -> int:
    """Positions of a shared prompt in front of a layer's own rows (0 for a plain layer); a sliding window
    counts what its own cache would keep, its last window - 1 positions."""
    prefix = getattr(layer, f"prefix_{name}", None)
    if prefix is None:
        return 0
    own = getattr(layer, name).shape[-2]
    window = getattr(layer, "sliding_window", None)
    whole = prefix.shape[-2] + own
    return (min(whole, window - 1) if window else whole) - own


@dataclass(frozen=True)
class Block:
    index: int          # position of the block in a sequence (0 = first 16 tokens)
    tokens: tuple       # token ids stored in it
    refs: int           # how many beams point at it
    beams: tuple        # which beam slots point at it
    full: bool


@dataclass(frozen=True)
class PagedLayout:
    blocks: list        # [Block], shared ones once
    tables: list        # per beam: indices into blocks, in order

    @property
    def rows(self) -> int:
        return sum(len(b.tokens) for b in self.blocks)

    @property
    def shared_blocks(self) -> int:
        return sum(1 for b in self.blocks if b.refs > 1)


def paged_layout(sequences: list, block_size: int = BLOCK_SIZE) -> PagedLayout:
    """Blocks a prefix-sharing cache would allocate for these token sequences (one per beam)."""
    blocks: list = []
    by_prefix: dict = {}
    tables = []
    for beam, seq in enumerate(sequences):
        table = []
        seq = tuple(seq)
        for start in range(0, len(seq), block_size):
            chunk = seq[start:start + block_size]
            full = len(chunk) == block_size
            key = seq[:start + block_size] if full else (beam, seq)   # partial blocks are never shared
            if key in by_prefix:
                i = by_prefix[key]
                old = blocks[i]
                blocks[i] = Block(old.index, old.tokens, old.refs + 1, old.beams + (beam,), old.full)
            else:
                i = len(blocks)
                by_prefix[key] = i
                blocks.append(Block(start // block_size, chunk, 1, (beam,), full))
            table.append(i)
        tables.append(table)
    return PagedLayout(blocks=blocks, tables=tables)
