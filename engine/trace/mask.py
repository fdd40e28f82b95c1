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


def packed_mask(text: str, vocab_size: int) -> np.ndarray:
    """The mask's bytes (one bit per token, little-endian), checked: exactly one mask of vocab_size bits, no bit
    set beyond the vocabulary. Raises ValueError otherwise, or for a vocabulary over MAX_VOCAB tokens
    (inflating stops at the bytes that size allows). Counting and testing bits here costs a 2**20-token
    mask 128 KiB, not the 1 MiB per byte-per-token copy an unpacked one takes."""
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
    bits = np.frombuffer(packed, dtype=np.uint8)
    if vocab_size % 8 and bits[-1] >> (vocab_size % 8):
        raise ValueError("the mask allows tokens beyond the vocabulary")
    return bits


def allowed_count(packed: np.ndarray) -> int:
    """How many tokens a packed mask allows."""
    return int(np.bitwise_count(packed).sum())


def allows(packed: np.ndarray, token_id: int) -> bool:
    """Whether a packed mask allows `token_id` (an id inside its vocabulary)."""
    return bool((int(packed[token_id >> 3]) >> (token_id & 7)) & 1)


def unpack_mask(text: str, vocab_size: int) -> torch.Tensor:
    """The inverse of pack_mask: [vocab_size] bool; raises ValueError as packed_mask does."""
    bits = np.unpackbits(packed_mask(text, vocab_size), bitorder="little")
    return torch.from_numpy(bits[:vocab_size].astype(bool))
