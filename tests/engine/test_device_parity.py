"""Parity with `generate` on another device and in half precision.

CI runs it on the CPU (bfloat16 and float32). `make gpu-check` runs the same file with
DECODESCOPE_TEST_DEVICE=cuda. The reference is `model.generate` on the same model, device and
dtype; tokens must be equal.
"""
from __future__ import annotations

import os

import pytest
import torch

from engine import DecodeConfig, decode
from engine.model import LoadedModel
from generate_reference import generate_ids, strip_generated
from tiny_models import TINY_BUILDERS

DEVICE = os.environ.get("DECODESCOPE_TEST_DEVICE", "cpu")
PROMPT = "The capital of France is"
if DEVICE == "cuda" and not torch.cuda.is_available():
    pytest.skip("DECODESCOPE_TEST_DEVICE=cuda, but PyTorch sees no CUDA GPU", allow_module_level=True)

_PLACED = {}


def placed(arch: str, dtype: torch.dtype) -> LoadedModel:
    """A tiny model moved to DEVICE in `dtype`, wrapped as the engine wraps any model."""
    if (arch, dtype) not in _PLACED:
        built = TINY_BUILDERS[arch]()
        _PLACED[arch, dtype] = LoadedModel.from_parts(built.model.to(device=DEVICE, dtype=dtype), built.tokenizer,
                                                      f"tiny-{arch}")
    return _PLACED[arch, dtype]


def generated(lm, prompt_ids, **kwargs):
    out = lm.model.generate(torch.tensor([prompt_ids], device=DEVICE),
                            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long, device=DEVICE),
                            pad_token_id=lm.model.generation_config.pad_token_id,
                            eos_token_id=list(lm.eos_token_ids), **kwargs)
    return out


DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arch", sorted(TINY_BUILDERS))
def test_greedy_matches_generate(arch, dtype):
    lm = placed(arch, dtype)
    trace = decode(lm, PROMPT, DecodeConfig(strategy="greedy", max_new_tokens=12))
    out = generated(lm, trace.prompt_token_ids, do_sample=False, max_new_tokens=12)
    assert trace.best.token_ids == strip_generated(out[0].cpu(), len(trace.prompt_token_ids), 0, lm.eos_token_ids)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arch", sorted(TINY_BUILDERS))
def test_beam_matches_generate(arch, dtype):
    lm = placed(arch, dtype)
    cfg = DecodeConfig(strategy="beam", num_beams=3, num_return_sequences=3, max_new_tokens=8)
    trace = decode(lm, PROMPT, cfg)
    out = generated(lm, trace.prompt_token_ids, do_sample=False, num_beams=3, num_return_sequences=3,
                    max_new_tokens=8, early_stopping=False, length_penalty=1.0)
    for row, seq in zip(out, trace.sequences):
        assert seq.token_ids == strip_generated(row.cpu(), len(trace.prompt_token_ids), None, lm.eos_token_ids)


@pytest.mark.skipif(DEVICE != "cpu", reason="generate draws from the GPU's generator there, the engine from its own")
@pytest.mark.parametrize("arch", sorted(TINY_BUILDERS))
def test_bfloat16_sampling_matches_generate_with_the_same_seed(arch):
    lm = placed(arch, torch.bfloat16)
    cfg = DecodeConfig(strategy="sample", max_new_tokens=12, temperature=0.9, top_p=0.9, seed=7)
    trace = decode(lm, PROMPT, cfg)
    torch.manual_seed(7)
    out = generate_ids(lm, trace.prompt_token_ids, do_sample=True, max_new_tokens=12, temperature=0.9, top_p=0.9,
                       top_k=0)   # generate would add its default top-k of 50
    assert trace.best.token_ids == strip_generated(out[0], len(trace.prompt_token_ids), 0, lm.eos_token_ids)


@pytest.mark.parametrize("arch", sorted(TINY_BUILDERS))
def test_facts_follow_the_dtype_and_the_device(arch):
    full, half = placed(arch, torch.float32).facts, placed(arch, torch.bfloat16).facts
    assert (full.dtype, full.dtype_bytes, half.dtype, half.dtype_bytes) == ("float32", 4, "bfloat16", 2)
    assert half.kv_bytes_per_token * 2 == full.kv_bytes_per_token
    # by hand: 2 (K and V) x layers x KV heads x head dim x 2 bytes
    assert half.kv_bytes_per_token == 2 * half.layers * half.kv_heads * half.head_dim * 2
    assert half.device.startswith(DEVICE)


@pytest.mark.parametrize("arch", sorted(TINY_BUILDERS))
def test_a_one_hot_soft_input_in_bfloat16_is_the_token_embedding(arch):
    lm = placed(arch, torch.bfloat16)
    ids = torch.tensor([[3, 7, 11]])
    one_hot = torch.nn.functional.one_hot(ids, lm.facts.vocab_size).float()
    as_vectors = lm.model_inputs("embeds", one_hot @ lm.embeddings)
    assert as_vectors.dtype == torch.bfloat16
    assert torch.equal(as_vectors, lm.model.get_input_embeddings()(ids.to(DEVICE)))
