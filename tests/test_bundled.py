"""A smaller set on the bundled SmolLM2-135M-Instruct: facts from MODEL.md and parity with generate."""
from __future__ import annotations

import pytest
import torch

from engine import DecodeConfig, decode


def test_bundled_facts(bundled):
    f = bundled.facts
    assert (f.vocab_size, f.layers, f.hidden_size, f.heads, f.kv_heads) == (49152, 30, 576, 9, 3)
    assert 134_000_000 < f.parameters < 135_000_000
    assert f.kv_bytes_per_token == 2 * 30 * 3 * 64 * 4
    assert f.has_chat_template


def test_bundled_answers(bundled):
    assert decode(bundled, "The capital of France is", DecodeConfig(max_new_tokens=3)).best.text.startswith(" Paris.")
    chat = decode(bundled, "What is the capital of France?", DecodeConfig(max_new_tokens=10, chat=True))
    assert chat.best.text.startswith("The capital of France is Paris.")


def _generate(lm, ids, **kw):
    return lm.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             pad_token_id=2, **kw)


def test_bundled_greedy_and_sample_parity(bundled):
    prompt = "Once upon a time"
    greedy = decode(bundled, prompt, DecodeConfig(max_new_tokens=16))
    out = _generate(bundled, greedy.prompt_token_ids, do_sample=False, max_new_tokens=16)
    assert greedy.best.token_ids == out[0, len(greedy.prompt_token_ids):].tolist()[: len(greedy.best.token_ids)]
    cfg = DecodeConfig(strategy="sample", max_new_tokens=16, temperature=0.8, top_k=40, top_p=0.95, seed=42)
    sample = decode(bundled, prompt, cfg)
    torch.manual_seed(42)
    out = _generate(bundled, sample.prompt_token_ids, do_sample=True, max_new_tokens=16, temperature=0.8, top_k=40,
                    top_p=0.95)
    assert sample.best.token_ids == out[0, len(sample.prompt_token_ids):].tolist()[: len(sample.best.token_ids)]


def test_bundled_beam_parity(bundled):
    prompt = "The best way to learn is"
    cfg = DecodeConfig(strategy="beam", num_beams=4, num_return_sequences=4, length_penalty=0.8, max_new_tokens=12)
    trace = decode(bundled, prompt, cfg)
    out = _generate(bundled, trace.prompt_token_ids, do_sample=False, num_beams=4, num_return_sequences=4,
                    length_penalty=0.8, max_new_tokens=12, output_scores=True, return_dict_in_generate=True)
    P = len(trace.prompt_token_ids)
    for row, seq, score in zip(out.sequences, trace.sequences, out.sequences_scores):
        ids = row[P:].tolist()
        assert seq.token_ids == ids[: len(seq.token_ids)]
        assert seq.score == pytest.approx(float(score), abs=1e-4)


def test_bundled_soft_drifts_away_from_real_tokens(bundled):
    trace = decode(bundled, "The capital of France is", DecodeConfig(strategy="soft", max_new_tokens=6))
    cos = [s.feedback.nearest_cosine for s in trace.steps]
    assert cos[0] > 0.9                       # a peaked first distribution sits on a real token
    assert min(cos) < cos[0]                  # later mixtures fall between tokens
    assert all(-1.0 <= c <= 1.0 + 1e-6 for c in cos)
