"""A stage of a sampler chain written after another engine's rules, and the state a stage carries.

transformers' own processors are stateless: the context and the scores decide what they do. Some stages of
llama.cpp's and vLLM's chains need more, and some keep something worth showing at each step:
  - the prompt's length (vLLM counts frequency and presence over the output only), the vocabulary's texts
    and the tokenizer (DRY's sequence breakers are strings, and one may be split over tokens): `prepare`
    hands them over once the decode knows them;
  - a value of this step (the effective temperature, XTC's draw, the length of DRY's matched run): `state()`
    returns it, a small dict of plain numbers that the stage view records beside the stage;
  - a value carried from step to step (mirostat's μ): `accept(context, token)` hears the chosen token, and
    `carry(other)` hands what was learnt to a copy of the decode (a branch, a look-ahead).

Each stage masks a token by setting its score to -inf, as transformers' processors do, so stages.py records
all of them the same way. Stages read and write [batch, vocab] scores; a state describes row 0.
"""
from __future__ import annotations

import torch
from transformers import LogitsProcessor

NEG_INF = float("-inf")


class ChainStage(LogitsProcessor):
    """A stage of an engine's chain: `stage` names it (a name of config.STAGE_NAMES, its setting)."""
    stage: tuple = ("", 0.0)

    def __init__(self):
        self.last_state: dict = {}

    def state(self, chosen: int | None = None) -> dict:
        """This step's state (after the last call), for the record; `chosen` is the token drawn, when known."""
        return dict(self.last_state)


def prepare(processors, prompt_length: int | None = None, token_texts=None, tokenize=None) -> None:
    """Tell the stages that need them the prompt's length, the vocabulary's texts and `tokenize` (text -> the
    model's token ids for it, no special tokens added)."""
    for processor in processors:
        if hasattr(processor, "prepare"):
            processor.prepare(prompt_length=prompt_length, token_texts=token_texts, tokenize=tokenize)


def accept(processors, context: torch.Tensor, token: int) -> None:
    """Tell the stages that carry state which token row 0 of `context` [1, n] took."""
    for processor in processors:
        if hasattr(processor, "accept"):
            processor.accept(context, token)


def carry(source, target) -> None:
    """Hand the state carried by `source`'s stages to the same stages of `target` (a copy of the decode)."""
    for old, new in zip(source, target):
        if hasattr(new, "carry") and type(old) is type(new):
            new.carry(old)


def finite_count(scores: torch.Tensor) -> torch.Tensor:
    """[batch] the tokens still possible (score above -inf)."""
    return (~torch.isneginf(scores)).sum(-1)
