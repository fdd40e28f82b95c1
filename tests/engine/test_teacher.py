"""engine.inside.teacher on tiny random models: every number against an independent reference.

References are plain forward passes over whole prefixes (no cache), hand-worked KL values,
and engine.Decoder for free running. eps = 0 must be teacher forcing, eps = 1 free running.
"""
from __future__ import annotations

import math

import pytest
import torch

from engine import ConfigError, DecodeConfig
from engine.decoding.decoder import Decoder
from engine.inside.teacher import (coins, curve_passes, epsilon_curve, free_run, kl_divergence, runs,
                                   scheduled_sampling,
                            teacher_force)

PROMPT = "The capital of France"
REFERENCE = " is Paris. The capital of Italy is Rome."


def next_logprobs(lm, ids: list) -> torch.Tensor:
    """log p(. | ids) from a full forward pass over exactly these ids, in float64."""
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    return torch.log_softmax(logits, -1)


def ids_of(lm):
    return lm.tokenizer(PROMPT)["input_ids"], lm.tokenizer(REFERENCE, add_special_tokens=False)["input_ids"]


class TestKL:
    def test_hand_computed(self):
        p, q = torch.tensor([0.5, 0.5]), torch.tensor([0.9, 0.1])
        expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)     # = 0.5108...
        assert float(kl_divergence(p.log(), q.log())) == pytest.approx(expected, abs=1e-6)
        assert expected == pytest.approx(0.5108256, abs=1e-6)

    def test_zero_mass_counts_zero_and_same_is_zero(self):
        p, q = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.25, 0.25, 0.5])
        assert float(kl_divergence(p.log(), q.log())) == pytest.approx(math.log(4), abs=1e-6)
        assert float(kl_divergence(q.log(), q.log())) == 0.0


class TestTeacherForce:
    def test_each_position_matches_a_prefix_forward(self, tiny):
        prompt, ref = ids_of(tiny)
        forced = teacher_force(tiny, PROMPT, REFERENCE)
        assert forced.prompt_ids == prompt and forced.reference_ids == ref
        total = 0.0
        for i, pos in enumerate(forced.positions):
            logp = next_logprobs(tiny, prompt + ref[:i])
            assert pos.token_id == ref[i]
            assert pos.logprob == pytest.approx(float(logp[ref[i]]), abs=1e-4)
            assert pos.prob == pytest.approx(math.exp(float(logp[ref[i]])), rel=1e-3)
            # rank by sorting: 1 + how many tokens are strictly more likely
            order = sorted(range(len(logp)), key=lambda k: -float(logp[k]))
            assert pos.rank == order.index(ref[i]) + 1
            p = logp.exp()
            assert pos.entropy == pytest.approx(float(-(p * logp).sum()), abs=1e-4)
            assert pos.top[0].token_id == int(logp.argmax())
            total += float(logp[ref[i]])
        assert forced.logprob == pytest.approx(total, abs=1e-3)

    def test_empty_reference_names_the_parameter(self, llama):
        with pytest.raises(ConfigError) as err:
            teacher_force(llama, PROMPT, "   ")
        assert err.value.param == "reference"


class TestFreeRun:
    def test_divergence_and_kl_against_two_prefix_forwards(self, llama):
        forced = teacher_force(llama, PROMPT, REFERENCE)
        run = free_run(llama, forced, PROMPT)
        prompt, ref = ids_of(llama)
        # the greedy continuation, token by token with full forwards
        own = []
        for _ in range(len(ref)):
            own.append(int(next_logprobs(llama, prompt + own).argmax()))
            if own[-1] in llama.eos_token_ids:
                break
        assert run.token_ids == own
        first = next(i for i, (a, b) in enumerate(zip(own, ref)) if a != b)
        assert run.first_divergence == first
        assert [d.index for d in run.comparison] == list(range(first, min(len(own), len(ref))))
        for d in run.comparison:
            p_true = next_logprobs(llama, prompt + ref[:d.index])
            p_own = next_logprobs(llama, prompt + own[:d.index])
            expected = float((p_true.exp() * (p_true - p_own)).sum())
            assert d.kl == pytest.approx(expected, abs=1e-3)
            assert d.own_prob_of_true == pytest.approx(float(p_own[ref[d.index]].exp()), abs=1e-4)
        # at the first divergence both prefixes are still equal
        assert run.comparison[0].kl == pytest.approx(0.0, abs=1e-4)


class TestScheduledSampling:
    def test_eps_zero_is_teacher_forcing(self, tiny):
        forced = teacher_force(tiny, PROMPT, REFERENCE)
        run = scheduled_sampling(tiny, forced, 0.0, seed=5)
        assert not any(run.swapped)
        assert run.inputs == forced.reference_ids
        assert run.forward_passes == 1
        for got, pos in zip(run.logprobs, forced.positions):
            assert got == pytest.approx(pos.logprob, abs=1e-4)
        assert run.logprob == pytest.approx(forced.logprob, abs=1e-3)

    def test_eps_one_greedy_is_free_running(self, tiny):
        forced = teacher_force(tiny, PROMPT, REFERENCE)
        run = scheduled_sampling(tiny, forced, 1.0, seed=5)
        free = free_run(tiny, forced, PROMPT)
        n = len(forced.reference_ids)
        assert all(run.swapped) and run.forward_passes == n
        m = len(free.token_ids)
        assert run.inputs[:m] == free.token_ids
        if m == n:
            assert run.logprob == pytest.approx(free.logprob, abs=1e-3)

    def test_eps_one_sampled_draws_what_the_decoder_draws(self, llama):
        forced = teacher_force(llama, PROMPT, REFERENCE)
        n = len(forced.reference_ids)
        trace = Decoder(llama, PROMPT, DecodeConfig(strategy="sample", max_new_tokens=n, seed=11,
                                                    temperature=1.3)).run()
        run = scheduled_sampling(llama, forced, 1.0, seed=11, strategy="sample", temperature=1.3)
        drawn = [s.chosen_ids[0] for s in trace.steps]
        assert run.inputs[:len(drawn)] == drawn

    def test_mixed_prefix_matches_a_full_forward(self, llama):
        """Whatever eps does, each logprob is log p(reference token | prompt + the inputs fed before it)."""
        forced = teacher_force(llama, PROMPT, REFERENCE)
        run = scheduled_sampling(llama, forced, 0.5, seed=2)
        assert 0 < sum(run.swapped) < len(run.swapped)
        prompt, ref = ids_of(llama)
        for i, got in enumerate(run.logprobs):
            logp = next_logprobs(llama, prompt + run.inputs[:i])
            assert got == pytest.approx(float(logp[ref[i]]), abs=1e-4)
            # a swapped input is the model's greedy choice at that position
            if run.swapped[i]:
                assert run.inputs[i] == int(logp.argmax())
            else:
                assert run.inputs[i] == ref[i]

    def test_coins_are_seeded_and_shared_across_eps(self, llama):
        u = coins(20, 3)
        assert u == torch.rand(20, generator=torch.Generator().manual_seed(3)).tolist()
        forced = teacher_force(llama, PROMPT, REFERENCE)
        curve = epsilon_curve(llama, forced, points=5, seed=3)
        assert [r.epsilon for r in curve] == [0.0, 0.25, 0.5, 0.75, 1.0]
        for lower, higher in zip(curve, curve[1:]):          # the swapped set only grows
            assert all(h or not lo for lo, h in zip(lower.swapped, higher.swapped))
        assert [sum(r.swapped) for r in curve] == [sum(v < e for v in coins(len(forced.reference_ids), 3))
                                                   for e in (0.0, 0.25, 0.5, 0.75, 1.0)]
        assert curve[0].logprob == pytest.approx(forced.logprob, abs=1e-3)

    def test_runs_split_at_each_swap_by_hand(self):
        # positions 0..5, swapped at 1 and 4: predict 0-1 in one pass, then 2-4, then 5
        assert runs([False, True, False, False, True, False]) == [(0, 1), (2, 4), (5, 5)]
        assert runs([False] * 4) == [(0, 3)]                       # teacher forcing: one pass
        assert runs([True] * 3) == [(0, 0), (1, 1), (2, 2)]        # free running: one pass per token
        assert runs([False, False, True]) == [(0, 2)]              # a swap at the last position costs nothing

    def test_curve_passes_counts_what_the_curve_runs(self, llama):
        forced = teacher_force(llama, PROMPT, REFERENCE)
        n = len(forced.reference_ids)
        curve = epsilon_curve(llama, forced, points=5, seed=3)
        assert curve_passes(n, 5, seed=3) == sum(r.forward_passes for r in curve)
        assert curve[0].forward_passes == 1 and curve[-1].forward_passes == n

    def test_bad_eps_names_the_parameter(self, llama):
        forced = teacher_force(llama, PROMPT, REFERENCE)
        with pytest.raises(ConfigError, match="epsilon"):
            scheduled_sampling(llama, forced, 1.5)
