"""Whole answers on the bundled SmolLM2: greedy's and beam search's answers are in the tree, with the
probability their own traces give (the sum of their tokens' log-probabilities, the end token included)."""
from __future__ import annotations

import math

import pytest

from engine import DecodeConfig, decode
from engine.answers import TreeSettings
from engine.answers.run import explore

pytestmark = pytest.mark.bundled
PROMPT = "What is the capital of France? Answer in one word."   # greedy: 7 tokens and the end


def test_greedy_and_beam_answers_are_in_the_tree_with_their_traces_probability(bundled):
    run = explore(bundled, PROMPT, TreeSettings(depth=8, budget=96, branch=4, batch=16), chat=True, beams=(1, 4))
    found = {a.token_ids: a.logprob for a in run.tree.answers}
    greedy = decode(bundled, PROMPT, DecodeConfig(max_new_tokens=9, chat=True))
    assert greedy.best.token_ids[-1] in bundled.eos_token_ids
    ids = tuple(greedy.best.token_ids[:-1])
    assert ids in found
    assert found[ids] == pytest.approx(sum(math.log(s.chosen.prob) for s in greedy.steps), abs=1e-3)
    beam = decode(bundled, PROMPT, DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=9, chat=True))
    ids = tuple(beam.best.token_ids[:-1])
    assert ids in found
    assert found[ids] == pytest.approx(beam.best.cum_logprob, abs=1e-3)
    landed = {x.strategy: x for x in run.landings}
    greedy_ids = tuple(greedy.best.token_ids[:-1])
    assert landed["greedy"].found and landed["greedy"].logprob == pytest.approx(found[greedy_ids], abs=1e-4)
    order = [a.token_ids for a in run.tree.answers]     # a strategy's answer found in the tree has its row's rank
    assert landed["greedy"].rank == order.index(greedy_ids) + 1
    assert landed["beam 4"].rank == order.index(tuple(beam.best.token_ids[:-1])) + 1
    assert run.tree.ledger.total == pytest.approx(1, abs=1e-9)
