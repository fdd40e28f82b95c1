"""engine.inside.embedding on tiny models: projection geometry, Gumbel over tau, cost counts, the soft lane."""
from __future__ import annotations

import math

import pytest
import torch

from engine import DecodeConfig
from engine.inside.embedding import feedback_cost, gumbel_sweep, project, soft_lane
from engine.tokens import first_difference

PROMPT = "The capital of France is"


class TestProject:
    def test_midpoint_stays_a_midpoint_and_cosines_are_right(self, llama):
        E = llama.embeddings.detach().float()
        a, b, c = 10, 20, 30
        e = 0.5 * E[a] + 0.5 * E[b]
        weights = torch.zeros(llama.facts.vocab_size)
        weights[a] = weights[b] = 0.5
        proj = project(llama, e, 0, [a, b, c], [], weights)
        pts = {p.token_id: p for p in proj.tokens}
        # PCA is an affine map, so the midpoint of a and b lands midway between their points
        assert proj.x == pytest.approx((pts[a].x + pts[b].x) / 2, abs=1e-4)
        assert proj.y == pytest.approx((pts[a].y + pts[b].y) / 2, abs=1e-4)
        for t in (a, b, c):
            cos = float(E[t] @ e / (E[t].norm() * e.norm()))
            assert pts[t].cosine == pytest.approx(cos, abs=1e-5)
        assert pts[a].weight == 0.5 and pts[c].weight == 0.0
        assert 0.0 < proj.explained <= 1.0 + 1e-6

    def test_four_points_in_a_plane_keep_all_variance(self, llama):
        E = llama.embeddings.detach().float()
        # e lies in the plane of a, b, c, so 2 axes explain everything
        e = 0.2 * E[1] + 0.3 * E[2] + 0.5 * E[3]
        proj = project(llama, e, 0, [1, 2, 3], [], torch.zeros(llama.facts.vocab_size))
        assert proj.explained == pytest.approx(1.0, abs=1e-5)


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_cost_counts_by_hand(llama):
    cost = feedback_cost(llama, repeats=3)
    V, H = llama.model.config.vocab_size, llama.model.config.hidden_size
    assert (cost.vocab_size, cost.hidden_size) == (V, H)
    assert cost.mixture_multiply_adds == V * H
    assert cost.mixture_bytes_read == V * H * 4
    assert cost.p_bytes == V * 4
    assert cost.lookup_bytes_read == H * 4
    assert cost.mixture_seconds > 0 and cost.lookup_seconds > 0


def test_cost_counts_the_models_own_precision():
    from tiny_models import tiny_llama

    half = tiny_llama()
    half.model.to(torch.bfloat16)
    cost = feedback_cost(half, repeats=3)
    V, H = half.model.config.vocab_size, half.model.config.hidden_size
    assert cost.mixture_bytes_read == V * H * 2 and cost.p_bytes == V * 2 and cost.lookup_bytes_read == H * 2


def test_gumbel_sweep_goes_one_hot(llama):
    taus = [5.0, 1.0, 0.1, 0.01, 0.0001]
    points = gumbel_sweep(llama, PROMPT, taus, seed=4)
    # the same draw, made here: argmax of log p + g is the token every small tau converges to
    ids = llama.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        logits = llama.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    u = torch.rand(logits.shape, generator=torch.Generator().manual_seed(4)).clamp(1e-10, 1 - 1e-10)
    noisy = torch.log_softmax(logits, -1) - torch.log(-torch.log(u))
    winner = int(noisy.argmax())
    assert [p.top[0].token_id for p in points][-1] == winner
    weights = [p.top_weight for p in points]
    assert weights == sorted(weights)                       # largest weight grows as tau shrinks
    assert weights[-1] > 0.99
    for tau, point in zip(taus, points):
        y = torch.softmax(noisy / tau, -1)
        assert point.top_weight == pytest.approx(float(y.max()), abs=1e-5)
        assert point.entropy == pytest.approx(float(-(y * y.clamp_min(1e-38).log()).sum()), abs=1e-4)


def test_soft_lane_projection_per_step_and_cold_temperature(llama):
    trace, projections = soft_lane(llama, PROMPT, DecodeConfig(strategy="soft", max_new_tokens=5, temperature=0.05))
    assert [p.step for p in projections] == [s.index for s in trace.steps]
    for step, proj in zip(trace.steps, projections):
        # at temperature 0.05 the mixture is essentially the argmax token, so e is that token's embedding
        assert step.feedback.nearest_cosine > 0.99
        assert step.feedback.nearest[0].token_id == step.feedback.argmax_id
        near = [p for p in proj.tokens if p.nearest]
        assert len(near) == 10
        best = max(near, key=lambda p: p.cosine)
        assert math.hypot(best.x - proj.x, best.y - proj.y) <= min(math.hypot(p.x - proj.x, p.y - proj.y)
                                                                  for p in near) + 1e-3


def exact_nearest(lm, vector: torch.Tensor, k: int = 10):
    """Cosine to every row of E in float64, the plain way."""
    E = lm.embeddings.double()
    v = vector.double()
    cosine = (E @ v) / (E.norm(dim=-1).clamp_min(1e-12) * v.norm())      # a zero (padding) row scores 0
    top = torch.topk(cosine, k)
    return top.indices.tolist(), top.values.tolist()


@pytest.mark.parametrize("vocab", [None, 1000])       # the tokenizer's ~300 (one exact pass) and a wider head
def test_nearest_by_cosine_equals_a_full_search(vocab):
    from engine.decoding.record import nearest_by_cosine
    from tiny_models import tiny_llama

    lm = tiny_llama(vocab_size=vocab)
    g = torch.Generator().manual_seed(0)
    E = lm.embeddings.float()
    for trial in range(40):
        # mixtures from peaked to flat, plus plain random directions
        temperature = [0.05, 0.3, 1.0, 5.0][trial % 4]
        p = torch.softmax(torch.randn(E.shape[0], generator=g) / temperature, -1)
        vector = p @ E if trial % 5 else torch.randn(E.shape[1], generator=g)
        values, ids = nearest_by_cosine(lm, vector, vector.norm(), 10)
        want_ids, want_values = exact_nearest(lm, vector)
        assert ids.tolist() == want_ids
        assert values.tolist() == pytest.approx(want_values, abs=1e-5)
