"""The batch a run decodes in: the prompt's row among B - 1 rows of other text, as a server would batch strangers.

"same": every filler is exactly as long as the prompt, so nothing is padded and only the matrix products see
another number of rows. "padded": the fillers are longer and shorter, and every row is padded on the left to the
longest, as `generate` batches prompts; the prompt's row then attends past pad positions it must mask.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model import LoadedModel

FILLER_TEXTS = (
    "The weather report for tomorrow says rain in the morning and sun after lunch, with a light wind.",
    "Write a short poem about the sea, the gulls above it and the boats coming home at night.",
    "List three uses of a paper clip that have nothing to do with holding paper together.",
    "In 1969 two astronauts walked on the Moon while a third circled above them in the command module.",
    "Explain how a bicycle stays upright when it moves and why it falls over when it stops.",
    "A recipe for bread needs flour, water, salt and yeast, and a few hours for the dough to rise.",
    "The museum opens at nine, closes at five, and is free on the first Sunday of every month.",
    "Translate into French: the cat sleeps on the warm windowsill while the rain falls outside.",
)
# left-padded batches: each filler this many tokens longer (or shorter) than the prompt, in turn
PADDED_OFFSETS = (7, -3, 13, -5, 2, 19, -1, 4)


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor          # [B, L] the rows, left-padded to the longest
    attention_mask: torch.Tensor     # [B, L] 1 on tokens, 0 on padding
    row: int                         # the prompt's row

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]

    @property
    def padded(self) -> bool:
        return bool((self.attention_mask == 0).any())


def prompt_row(batch_size: int) -> int:
    """Where the prompt sits in a batch: the middle row (a server places a request wherever it lands)."""
    return batch_size // 2


def filler_ids(lm: LoadedModel, length: int, index: int) -> list:
    """`length` token ids of filler text number `index` (the texts in turn, joined when one is too short); tokenised
    the way the prompt is, so a model that starts every text with a special token sees one here too."""
    ids = list(lm.tokenizer(FILLER_TEXTS[index % len(FILLER_TEXTS)])["input_ids"])
    more = index + 1
    while len(ids) < length:
        ids += list(lm.tokenizer(" " + FILLER_TEXTS[more % len(FILLER_TEXTS)], add_special_tokens=False)["input_ids"])
        more += 1
    return ids[:length]


def pad_id(lm: LoadedModel) -> int:
    tok = lm.tokenizer
    for candidate in (tok.pad_token_id, tok.eos_token_id, *lm.eos_token_ids, 0):
        if candidate is not None:
            return int(candidate)
    return 0


def make_batch(lm: LoadedModel, prompt_ids: list, batch_size: int, fill: str) -> Batch:
    """The prompt at row `prompt_row(batch_size)` among fillers; fill 'same' or 'padded' (module docstring)."""
    n, row = len(prompt_ids), prompt_row(batch_size)
    rows, filler = [], 0
    for i in range(batch_size):
        if i == row:
            rows.append(list(prompt_ids))
            continue
        length = n if fill == "same" else max(1, n + PADDED_OFFSETS[filler % len(PADDED_OFFSETS)])
        rows.append(filler_ids(lm, length, filler))
        filler += 1
    width = max(len(r) for r in rows)
    pad = pad_id(lm)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
    return Batch(ids, mask, row)
