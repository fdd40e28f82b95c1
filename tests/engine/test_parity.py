"""The recorded choices must be exactly what transformers' own `generate` produces."""
from __future__ import annotations

import pytest
import torch

from tiny_models import tiny_gpt2, tiny_llama
from engine import DecodeConfig, decode
from generate_reference import generate_ids, strip_generated

PROMPTS = ["The capital of France is", "Beam search keeps"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_matches_generate(tiny, prompt):
    trace = decode(tiny, prompt, DecodeConfig(strategy="greedy", max_new_tokens=12))
    out = generate_ids(tiny, trace.prompt_token_ids, do_sample=False, max_new_tokens=12)
    assert trace.best.token_ids == strip_generated(out[0], len(trace.prompt_token_ids), 0, tiny.eos_token_ids)
    # the chosen token is the raw argmax at every step
    for step in trace.steps:
        assert step.chosen_ids[0] == step.candidates[0].token_id
        assert step.candidates[0].rank == 1


@pytest.mark.parametrize("seed", [0, 7, 123])
@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 20, 1.0), (1.3, 0, 0.8), (0.9, 50, 0.9)])
def test_sampling_matches_generate_with_same_seed(llama, seed, temperature, top_k, top_p):
    cfg = DecodeConfig(strategy="sample", max_new_tokens=15, temperature=temperature, top_k=top_k, top_p=top_p,
                       seed=seed)
    trace = decode(llama, "The capital of France is", cfg)
    torch.manual_seed(seed)
    out = generate_ids(llama, trace.prompt_token_ids, do_sample=True, max_new_tokens=15, temperature=temperature,
                       top_k=top_k, top_p=top_p)
    assert trace.best.token_ids == strip_generated(out[0], len(trace.prompt_token_ids), 0, llama.eos_token_ids)


def test_sampling_does_not_touch_global_rng(llama):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    decode(llama, "The capital", DecodeConfig(strategy="sample", max_new_tokens=5, seed=1))
    assert torch.equal(torch.rand(3), expected)


def _eos_model(builder):
    """A tiny model whose EOS is a token beam search meets early, so hypotheses finish."""
    lm = builder()
    trace = decode(lm, "The capital of France is", DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=4))
    frequent = [n.token_id for n in trace.nodes if n.step == 1 and n.status != "root"]
    return builder(eos_token_id=frequent[1])


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def eos_lm(request):
    return _eos_model(tiny_llama if request.param == "llama" else tiny_gpt2)


@pytest.mark.parametrize("num_beams", [2, 3, 5])
@pytest.mark.parametrize("length_penalty", [1.0, 0.6, 2.0])
@pytest.mark.parametrize("early_stopping", [False, True, "never"])
def test_beam_matches_generate(eos_lm, num_beams, length_penalty, early_stopping):
    prompt = "The capital of France is"
    cfg = DecodeConfig(strategy="beam", num_beams=num_beams, length_penalty=length_penalty,
                       early_stopping=early_stopping, num_return_sequences=num_beams, max_new_tokens=10)
    trace = decode(eos_lm, prompt, cfg)
    out = eos_lm.model.generate(torch.tensor([trace.prompt_token_ids]), do_sample=False, num_beams=num_beams,
                                length_penalty=length_penalty, early_stopping=early_stopping,
                                num_return_sequences=num_beams, max_new_tokens=10, output_scores=True,
                                return_dict_in_generate=True, eos_token_id=list(eos_lm.eos_token_ids),
                                pad_token_id=eos_lm.model.generation_config.pad_token_id,
                                attention_mask=torch.ones(1, len(trace.prompt_token_ids), dtype=torch.long))
    P = len(trace.prompt_token_ids)
    assert len(trace.sequences) == num_beams
    for row, seq, score in zip(out.sequences, trace.sequences, out.sequences_scores):
        assert seq.token_ids == strip_generated(row, P, None, eos_lm.eos_token_ids)
        assert seq.score == pytest.approx(float(score), abs=1e-4)


def test_some_beam_hypotheses_finish_on_eos(eos_lm):
    trace = decode(eos_lm, "The capital of France is",
                   DecodeConfig(strategy="beam", num_beams=3, num_return_sequences=3, max_new_tokens=10))
    assert any(n.status == "finished" and n.token_id in eos_lm.eos_token_ids for n in trace.nodes)


def test_tree_scores_recompute_from_step_logprobs(eos_lm):
    lp = 1.5
    trace = decode(eos_lm, "Beam search keeps", DecodeConfig(strategy="beam", num_beams=4, length_penalty=lp,
                                                             num_return_sequences=4, max_new_tokens=8))
    by_id = {n.id: n for n in trace.nodes}
    for node in trace.nodes:
        if node.parent is None:
            continue
        parent = by_id[node.parent]
        assert node.length == parent.length + 1
        assert node.cum_logprob == pytest.approx(parent.cum_logprob + node.logprob, abs=1e-4)
        assert node.score == pytest.approx(node.cum_logprob / node.length ** lp, rel=1e-6)
    # each final sequence is the token path from the root to its leaf, and carries the leaf's score
    for seq in trace.sequences:
        path, node = [], by_id[seq.node_id]
        while node.parent is not None:
            path.append(node.token_id)
            node = by_id[node.parent]
        assert path[::-1] == seq.token_ids
        assert seq.score == pytest.approx(by_id[seq.node_id].score, abs=1e-6)
    graph = trace.graph()
    assert graph.number_of_nodes() == len(trace.nodes) and graph.number_of_edges() == len(trace.nodes) - 1
    # 2B continuations ranked per step; exactly B of them keep running (until the last step)
    for step in trace.steps[:-1]:
        expanded = [n for n in trace.nodes if n.step == step.index]
        assert len(expanded) == 2 * 4
        assert sum(n.status == "kept" for n in expanded) == 4


def _soft_reference(lm, prompt_ids, steps, temperature=1.0):
    """Expected-embedding decoding without a KV cache: rerun the whole sequence of vectors every step."""
    E = lm.embeddings.detach().float()
    vectors = [E[i] for i in prompt_ids]
    argmaxes, cosines = [], []
    for _ in range(steps):
        logits = lm.model(inputs_embeds=torch.stack(vectors)[None]).logits[0, -1].float()
        p = torch.softmax(logits / temperature, -1)
        e = p @ E
        cos = torch.nn.functional.cosine_similarity(E, e[None], dim=-1)
        argmaxes.append(int(p.argmax()))
        cosines.append(float(cos.max()))
        vectors.append(e)
    return argmaxes, cosines


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_soft_matches_reference_loop(tiny, temperature):
    cfg = DecodeConfig(strategy="soft", max_new_tokens=8, temperature=temperature)
    trace = decode(tiny, "The capital of France is", cfg)
    with torch.no_grad():
        argmaxes, cosines = _soft_reference(tiny, trace.prompt_token_ids, len(trace.steps), temperature)
    assert trace.best.token_ids == argmaxes[: len(trace.best.token_ids)]
    for step, cos in zip(trace.steps, cosines):
        assert step.feedback.nearest_cosine == pytest.approx(cos, abs=1e-4)
        assert step.feedback.argmax_id == step.chosen_ids[0]


def test_gumbel_hard_feeds_back_a_real_token(llama):
    trace = decode(llama, "The capital", DecodeConfig(strategy="gumbel", tau=0.5, hard=True, max_new_tokens=6, seed=3))
    for step in trace.steps:
        # a one-hot mixture is exactly one embedding row: cosine 1 to that token
        assert step.feedback.nearest_cosine == pytest.approx(1.0, abs=1e-5)
        assert step.feedback.weights[0].value == pytest.approx(1.0)
        assert step.feedback.entropy == pytest.approx(0.0, abs=1e-6)


def test_gumbel_reference_and_low_tau_approaches_one_hot(llama):
    """Reference: y = softmax((log p + g) / tau) with g = -log(-log U), U from the same seeded generator."""
    seed, tau = 11, 0.7
    trace = decode(llama, "The capital", DecodeConfig(strategy="gumbel", tau=tau, max_new_tokens=5, seed=seed))
    g = torch.Generator().manual_seed(seed)
    E = llama.embeddings.detach().float()
    vectors = [E[i] for i in trace.prompt_token_ids]
    with torch.no_grad():
        for step in trace.steps:
            logits = llama.model(inputs_embeds=torch.stack(vectors)[None]).logits[0, -1].float()
            u = torch.rand(logits.shape, generator=g).clamp(1e-10, 1 - 1e-10)
            y = torch.softmax((torch.log_softmax(logits, -1) - torch.log(-torch.log(u))) / tau, -1)
            assert step.chosen_ids[0] == int(y.argmax())
            assert step.feedback.weights[0].value == pytest.approx(float(y.max()), abs=1e-4)
            vectors.append(y @ E)
    low = decode(llama, "The capital", DecodeConfig(strategy="gumbel", tau=0.01, max_new_tokens=5, seed=seed))
    assert min(s.feedback.weights[0].value for s in low.steps) > 0.99


def test_kv_rows_and_bytes_by_hand(llama):
    f = llama.facts
    per_token = 2 * f.layers * f.kv_heads * f.head_dim * 4          # K and V, float32
    assert f.kv_bytes_per_token == per_token
    trace = decode(llama, "The capital of France is", DecodeConfig(strategy="greedy", max_new_tokens=6))
    P = len(trace.prompt_token_ids)
    for t, step in enumerate(trace.steps):
        assert step.kv.rows == P + t
        assert step.kv.bytes == (P + t) * per_token
        assert step.kv.rows_appended == (P if t == 0 else 1)
        assert step.kv.paged_blocks == -(-(P + t) // 16)
    beam = decode(llama, "The capital of France is", DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=6))
    for t, step in enumerate(beam.steps):
        assert step.kv.rows == 3 * (P + t)
        assert step.kv.bytes == 3 * (P + t) * per_token
        assert step.kv.rows_appended == (3 * P if t == 0 else 3)


def test_soft_keeps_one_cache_the_size_of_greedys(llama):
    greedy = decode(llama, "The capital of France is", DecodeConfig(strategy="greedy", max_new_tokens=6))
    soft = decode(llama, "The capital of France is", DecodeConfig(strategy="soft", max_new_tokens=6))
    assert [s.kv.bytes for s in soft.steps] == [s.kv.bytes for s in greedy.steps][: len(soft.steps)]


def test_forced_token_branches_and_keeps_the_prefix(llama):
    cfg = DecodeConfig(strategy="sample", max_new_tokens=8, seed=4)
    base = decode(llama, "The capital", cfg)
    alt = next(c.token_id for c in base.steps[3].candidates if c.token_id != base.steps[3].chosen_ids[0])
    branch = decode(llama, "The capital", cfg, forced={3: alt})
    assert branch.best.token_ids[:3] == base.best.token_ids[:3]
    assert branch.best.token_ids[3] == alt
