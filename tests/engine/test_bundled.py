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


# ---- the "inside the choice" engines on the real model ----------------------------------------
def test_bundled_teacher_forcing_matches_a_plain_forward_pass(bundled):
    from engine.inside.teacher import epsilon_curve, teacher_force

    prompt, reference = "The capital of France is", " Paris. It is a big city."
    forced = teacher_force(bundled, prompt, reference)
    ids = forced.prompt_ids + forced.reference_ids
    with torch.no_grad():
        logp = torch.log_softmax(bundled.model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    P = len(forced.prompt_ids)
    expected = [float(logp[P - 1 + i, tok]) for i, tok in enumerate(forced.reference_ids)]
    assert forced.logprob == pytest.approx(sum(expected), abs=1e-3)
    assert forced.positions[0].rank == 1                         # MODEL.md: greedy answers " Paris"
    curve = epsilon_curve(bundled, forced, points=3)
    assert curve[0].logprob == pytest.approx(forced.logprob, abs=1e-3)      # eps = 0 is teacher forcing
    assert curve[-1].inputs == decode(bundled, prompt, DecodeConfig(max_new_tokens=len(ids) - P)).best.token_ids


def test_bundled_kv_rows_and_bytes_and_soft_keeps_one_cache(bundled):
    per_row = 2 * 30 * 3 * 64 * 4                   # K and V x layers x KV heads x head dim x float32
    greedy = decode(bundled, "The capital of France is", DecodeConfig(max_new_tokens=5))
    soft = decode(bundled, "The capital of France is", DecodeConfig(strategy="soft", max_new_tokens=5))
    P = len(greedy.prompt_token_ids)
    for i, (g, s) in enumerate(zip(greedy.steps, soft.steps)):
        assert g.kv.rows == s.kv.rows == P + i            # the prompt, plus one row per token fed back
        assert g.kv.bytes == s.kv.bytes == (P + i) * per_row


def test_bundled_feedback_cost_counts(bundled):
    from engine.inside.embedding import feedback_cost

    cost = feedback_cost(bundled, repeats=3)
    assert cost.mixture_multiply_adds == 49_152 * 576
    assert cost.p_bytes == 49_152 * 4
    assert cost.mixture_seconds > 0 and cost.lookup_seconds > 0


def test_bundled_nearest_search_is_exact(bundled):
    """The float16 shortlist in the soft step's nearest-token search finds the same 10 tokens,
    with the same cosines, as a float64 search over all 49,152 rows."""
    from engine.decoding.record import nearest_by_cosine

    E = bundled.embeddings.double()
    norms = E.norm(dim=-1).clamp_min(1e-12)
    g = torch.Generator().manual_seed(0)
    vectors = [torch.randn(576, generator=g) for _ in range(3)]
    for temperature in (0.3, 1.0, 3.0):          # mixtures from peaked to flat
        p = torch.softmax(torch.randn(49152, generator=g) / temperature, -1)
        vectors.append(p @ bundled.embeddings.float())
    for prompt in ("The capital of France is", "Once upon a time"):      # the model's own next-token mixtures
        ids = bundled.tokenizer(prompt)["input_ids"]
        with torch.no_grad():
            p = torch.softmax(bundled.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
        vectors.append(p @ bundled.embeddings.float())
    for vector in vectors:
        cosine = (E @ vector.double()) / (norms * vector.double().norm())
        want = torch.topk(cosine, 10)
        values, ids = nearest_by_cosine(bundled, vector.float(), vector.float().norm(), 10)
        # some rows of E are identical (unused special tokens), so tied ids may come in either order:
        # what must hold is that each returned id has the cosine of that rank, and none repeats
        assert len(set(ids.tolist())) == 10
        assert cosine[ids].tolist() == pytest.approx(want.values.tolist(), abs=1e-6)
        assert values.tolist() == pytest.approx(want.values.tolist(), abs=1e-5)
