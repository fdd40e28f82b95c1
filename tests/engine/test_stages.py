"""Each recorded sampler stage equals transformers' own processors applied one at a time."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from engine import DecodeConfig, Trace, decode

SETTINGS = dict(repetition_penalty=1.3, temperature=0.7, top_k=30, top_p=0.9, min_p=0.05)


def reference_processors():
    """Built here by hand, in the order generate documents, not through engine.samplers.shaping."""
    return [("repetition_penalty", RepetitionPenaltyLogitsProcessor(1.3)),
            ("temperature", TemperatureLogitsWarper(0.7)),
            ("top_k", TopKLogitsWarper(top_k=30)),
            ("top_p", TopPLogitsWarper(top_p=0.9)),
            ("min_p", MinPLogitsWarper(min_p=0.05))]


@pytest.mark.parametrize("seed", [0, 3])
def test_each_stage_matches_transformers_processors_one_at_a_time(tiny, seed):
    trace = decode(tiny, "The capital of France is", DecodeConfig(strategy="sample", max_new_tokens=8, seed=seed,
                                                                  **SETTINGS))
    ids = list(trace.prompt_token_ids)
    cut_somewhere = set()
    for step in trace.steps:
        context = torch.tensor([ids])
        with torch.no_grad():    # a fresh forward pass over the whole context, no cache
            scores = tiny.model(input_ids=context).logits[:, -1].float()
        candidate_ids = [c.token_id for c in step.candidates]
        assert [s.name for s in step.stages] == [name for name, _ in reference_processors()]
        for stage, (name, processor) in zip(step.stages, reference_processors()):
            before = torch.softmax(scores, -1)[0]
            after_scores = processor(context, scores.clone())
            after = torch.softmax(after_scores, -1)[0]
            removed = torch.isneginf(after_scores[0]) & ~torch.isneginf(scores[0])
            torch.testing.assert_close(torch.tensor(stage.probs), after[candidate_ids], atol=2e-5, rtol=1e-4)
            assert stage.kept_count == int((~torch.isneginf(after_scores[0])).sum())
            assert stage.cut_count == int(removed.sum())
            assert stage.removed_mass == pytest.approx(float(before[removed].sum()), abs=2e-5)
            assert stage.top_id == int(after.argmax())
            assert stage.top_prob == pytest.approx(float(after.max()), abs=2e-5)
            # the removed tokens are listed best first, by the scores the stage received
            expected_cut = sorted(removed.nonzero().flatten().tolist(), key=lambda i: -float(scores[0, i]))
            assert [c.token_id for c in stage.cut] == expected_cut[:len(stage.cut)]
            assert len(stage.cut) == min(20, len(expected_cut))
            if stage.cut_count:
                cut_somewhere.add(name)
            scores = after_scores
        # the last stage is the distribution the token was drawn from
        assert step.stages[-1].probs == pytest.approx([c.shaped_prob for c in step.candidates], abs=1e-6)
        ids.append(step.chosen_ids[0])
    assert {"top_k", "top_p"} <= cut_somewhere    # the test saw truncation actually happen


def test_greedy_has_only_the_penalty_stage(llama):
    plain = decode(llama, "The capital", DecodeConfig(strategy="greedy", max_new_tokens=3))
    assert all(step.stages == [] for step in plain.steps)
    penalised = decode(llama, "The capital", DecodeConfig(strategy="greedy", max_new_tokens=3, repetition_penalty=1.5))
    assert all([s.name for s in step.stages] == ["repetition_penalty"] for step in penalised.steps)


def test_stages_survive_json_and_older_traces_still_read(llama):
    trace = decode(llama, "The capital", DecodeConfig(strategy="sample", max_new_tokens=4, **SETTINGS))
    again = Trace.from_json(trace.to_json())
    assert again.steps[2].stages == trace.steps[2].stages
    old = json.loads(trace.to_json())
    for step in old["steps"]:
        del step["stages"]
    older = Trace.from_dict(old)
    assert all(step.stages == [] for step in older.steps)
    assert [s.candidates for s in older.steps] == [s.candidates for s in trace.steps]
