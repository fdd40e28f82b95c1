"""A grammar's mask in a trace: the allowed set as one bit per token, compressed, as base64 text.

A mask of 49,152 tokens is 6 KB of bits, and far less compressed (allowed tokens come in runs); reading
one back inflates at most one mask's bytes for a vocabulary of at most MAX_VOCAB tokens, whatever the file
claims: 250 KB of zlib can otherwise claim a gigabyte of bits per step.
"""
from __future__ import annotations

import base64
import binascii
import zlib

import numpy as np
import torch

from ..config import MAX_VOCAB


def pack_mask(allowed: torch.Tensor) -> str:
    """[V] bool -> text for a trace: the bits packed little-endian, zlib-compressed, base64."""
    packed = np.packbits(allowed.cpu().numpy().astype(np.uint8), bitorder="little").tobytes()
    return base64.b64encode(zlib.compress(packed, 9)).decode("ascii")


def unpack_mask(text: str, vocab_size: int) -> torch.Tensor:
    """The inverse of pack_mask; raises ValueError for text that does not unpack to exactly vocab_size bits,
    or for a vocabulary over MAX_VOCAB tokens (inflating stops at the bytes that size allows)."""
    if not 1 <= vocab_size <= MAX_VOCAB:
        raise ValueError(f"a mask over a vocabulary of {vocab_size:,} tokens; at most {MAX_VOCAB:,}")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError("the mask is not base64 text") from None
    size = (vocab_size + 7) // 8
    inflate = zlib.decompressobj()
    try:
        packed = inflate.decompress(raw, size + 1)     # never more than one mask's bytes, whatever the file says
    except zlib.error:
        raise ValueError("the mask is not compressed data") from None
    if len(packed) != size or not inflate.eof:
        raise ValueError(f"the mask does not unpack to {size:,} bytes, one bit per token of {vocab_size:,}")
    bits = np.unpackbits(np.frombuffer(packed, dtype=np.uint8), bitorder="little")
    if bits[vocab_size:].any():
        raise ValueError("the mask allows tokens beyond the vocabulary")
    return torch.from_numpy(bits[:vocab_size].astype(bool))
