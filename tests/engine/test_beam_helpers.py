"""Each beam-search helper against transformers' own helper of the same name, on random inputs.

transformers works on a batch; ours on one prompt. Each test adds the batch dim of 1 and
marks which beam or slot each row came from, so the picks can be compared, not only the scores.
"""
from __future__ import annotations

import pytest
import torch
from transformers.generation.utils import GenerationMixin as HF

from engine.decoding.beam import (NEG, early_stop_heuristic, has_unfinished_sequences, running_beams_for_next_iteration,
                         top_k_continuations, update_finished_beams)

CASES = [(seed, B, V) for seed in range(6) for B, V in ((1, 7), (2, 11), (3, 50), (5, 40))]
STOPPING = [True, False, "never"]


def _finished_set(g, B):
    """A finished set as beam search holds it: the first n slots filled, best first, the rest empty."""
    n = int(torch.randint(0, B + 1, (1,), generator=g))
    scores = torch.full((B,), NEG)
    scores[:n] = torch.sort(-torch.rand(n, generator=g) * 5, descending=True).values
    return scores, torch.arange(B) < n


@pytest.mark.parametrize("seed,B,V", CASES)
def test_top_k_continuations(seed, B, V):
    g = torch.Generator().manual_seed(seed)
    accumulated = -torch.rand(B, V, generator=g) * 10
    K, prompt_len, cur_len, max_len = 2 * B, 3, 5, 9
    scores, beam, token = top_k_continuations(accumulated, K)

    sequences = torch.zeros(1, B, max_len, dtype=torch.long)
    beam_indices = torch.zeros(1, B, max_len - prompt_len, dtype=torch.long)
    hf_scores, hf_sequences, hf_beams = HF._get_top_k_continuations(
        HF, accumulated.reshape(1, -1), sequences, beam_indices, cur_len=cur_len, decoder_prompt_len=prompt_len,
        do_sample=False, beams_to_keep=K, num_beams=B, batch_size=1)
    assert torch.equal(scores, hf_scores[0])
    assert torch.equal(token, hf_sequences[0, :, cur_len])
    assert torch.equal(beam, hf_beams[0, :, cur_len - prompt_len])


@pytest.mark.parametrize("seed,B,V", CASES)
def test_running_beams_for_next_iteration(seed, B, V):
    g = torch.Generator().manual_seed(100 + seed)
    K = 2 * B
    top_scores = torch.sort(-torch.rand(K, generator=g) * 10, descending=True).values
    reached_stop = torch.rand(K, generator=g) < 0.4
    pick, running = running_beams_for_next_iteration(top_scores, reached_stop, B)

    positions = torch.arange(K).reshape(1, K, 1)          # each continuation carries its own position
    hf_sequences, hf_scores, _ = HF._get_running_beams_for_next_iteration(
        HF, top_scores[None], positions, positions.clone(), reached_stop[None], num_beams=B)
    assert torch.equal(pick, hf_sequences[0, :, 0])
    assert torch.equal(running, hf_scores[0])


@pytest.mark.parametrize("seed,B,V", CASES)
@pytest.mark.parametrize("early_stopping", STOPPING)
@pytest.mark.parametrize("length_penalty", [0.6, 1.0, 2.0])
def test_update_finished_beams(seed, B, V, early_stopping, length_penalty):
    g = torch.Generator().manual_seed(200 + seed)
    K, prompt_len, cur_len = 2 * B, 4, 7
    done_scores, done_flags = _finished_set(g, B)
    top_scores = torch.sort(-torch.rand(K, generator=g) * 10, descending=True).values
    reached_stop = torch.rand(K, generator=g) < 0.5
    can_improve = bool(torch.rand(1, generator=g) < 0.8)
    length = cur_len + 1 - prompt_len
    pick, scores, flags, just_done = update_finished_beams(
        done_scores, done_flags, top_scores, reached_stop, length=length, length_penalty=length_penalty,
        early_stopping=early_stopping, can_improve=can_improve)

    # the row index says where each entry came from: 0..B-1 old slots, B.. the continuations
    old = torch.arange(B).reshape(1, B, 1)
    new = (B + torch.arange(K)).reshape(1, K, 1)
    hf_sequences, hf_scores, _, hf_flags = HF._update_finished_beams(
        HF, old, new, done_scores[None], top_scores[None], old.clone(), new.clone(),
        is_early_stop_heuristic_unsatisfied=torch.tensor([[can_improve]]), is_sent_finished=done_flags[None],
        next_token_hits_stopping_criteria=reached_stop[None], top_num_beam_mask=torch.arange(K) < B, num_beams=B,
        cur_len=cur_len, decoder_prompt_len=prompt_len, length_penalty=length_penalty,
        early_stopping=early_stopping)
    assert torch.equal(pick, hf_sequences[0, :, 0])
    assert torch.equal(scores, hf_scores[0])
    assert torch.equal(flags, hf_flags[0])
    assert torch.equal(just_done, reached_stop & (torch.arange(K) < B))


@pytest.mark.parametrize("seed,B,V", CASES)
@pytest.mark.parametrize("early_stopping", STOPPING)
@pytest.mark.parametrize("length_penalty", [-0.5, 0.0, 1.0, 2.0])
def test_early_stop_heuristic(seed, B, V, early_stopping, length_penalty):
    g = torch.Generator().manual_seed(300 + seed)
    prompt_len, cur_len, max_len = 3, 6 + seed, 20
    done_scores, done_flags = _finished_set(g, B)
    running = torch.sort(-torch.rand(B, generator=g) * 8, descending=True).values
    for can_improve in (True, False):
        ours = early_stop_heuristic(can_improve, running, done_scores, done_flags, cur_len=cur_len,
                                    max_length=max_len, prompt_len=prompt_len, early_stopping=early_stopping,
                                    length_penalty=length_penalty)
        hf = HF._check_early_stop_heuristic(torch.tensor([[can_improve]]), running[None], done_scores[None],
                                            done_flags[None], cur_len, max_len, prompt_len, early_stopping,
                                            length_penalty)
        assert ours == bool(hf)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("early_stopping", STOPPING)
def test_has_unfinished_sequences(seed, early_stopping):
    g = torch.Generator().manual_seed(400 + seed)
    B = 1 + seed % 4
    done_flags = torch.rand(B, generator=g) < 0.6
    reached_stop = torch.rand(2 * B, generator=g) < 0.6
    for can_improve in (True, False):
        ours = has_unfinished_sequences(can_improve, done_flags, reached_stop, early_stopping)
        hf = HF._beam_search_has_unfinished_sequences(torch.tensor([[can_improve]]), done_flags[None],
                                                      reached_stop[None], early_stopping)
        assert ours == bool(hf)


def test_the_cases_reach_both_outcomes():
    """The random cases above are not all one-sided: some stop and some go on, some finish and some not."""
    outcomes = set()
    for seed in range(12):
        g = torch.Generator().manual_seed(400 + seed)
        B = 1 + seed % 4
        done_flags, reached_stop = torch.rand(B, generator=g) < 0.6, torch.rand(2 * B, generator=g) < 0.6
        outcomes.add(has_unfinished_sequences(True, done_flags, reached_stop, True))
    assert outcomes == {True, False}
