"""The Whole answers reader against saved runs that lie while their total still adds up to 1, that carry
Markdown in a strategy's name, or that pad landings and sample outcomes to make the reader slow: each is
refused with one sentence naming the node and the field (or the list) at fault. Ranks by bisection are checked
against counting."""
from __future__ import annotations

import json
import math
import random

import pytest

from engine.answers import TreeSettings
from engine.answers.record import from_json, to_json
from engine.answers.run import explore
from engine.answers.tree import Answer, AnswerTree
from engine.errors import TraceFormatError
from tiny_models import tiny_llama

pytestmark = pytest.mark.tiny
MASS, END, LEFT, CUT, BEST = 3, 5, 6, 7, 8          # a node row's fields


@pytest.fixture(scope="module")
def written() -> dict:
    run = explore(tiny_llama(), "The capital of", TreeSettings(depth=3, budget=20, branch=3, batch=4),
                  beams=(1, 2, 4), samples=8)
    data = json.loads(to_json(run))
    assert run.tree.ledger.total == pytest.approx(1, abs=1e-9) and len(data["landings"]) == 3
    return data


def refused(data: dict) -> str:
    with pytest.raises(TraceFormatError) as info:
        from_json(json.dumps(data))
    message = str(info.value)
    assert "\n" not in message and "Error" not in message and len(message) < 400, message
    return message


def copy(data: dict) -> dict:
    return json.loads(json.dumps(data))


def mass(row) -> float:
    return math.exp(row[MASS])


def expanded(d: dict, depth_below: bool = True) -> list:
    """Ids of the expanded nodes (not the root), those before the depth or those at it."""
    return [i for i, row in enumerate(d["nodes"]) if i and len(row) == 11 and (row[CUT] == 0) == depth_below]


def children(d: dict, i: int) -> list:
    return [row for row in d["nodes"] if row[0] == i]


# ---- per-node lies: the total still adds up to 1 ------------------------------------------------------
def test_mass_moved_from_one_node_to_another_is_refused_at_the_first_node(written):
    d = copy(written)
    a, b = expanded(d)[:2]
    moved = d["nodes"][a][LEFT] / 2
    d["nodes"][a][LEFT] -= moved
    d["nodes"][b][LEFT] += moved
    message = refused(d)
    assert f"node {a}: its split" in message and "left_out" in message and "not its mass" in message


def test_a_best_child_left_out_above_what_was_left_out_is_refused(written):
    d = copy(written)
    i = expanded(d)[0]
    d["nodes"][i][BEST] = min(1.0, d["nodes"][i][LEFT] * 1.5)
    assert f"node {i}: best_left_out" in refused(d) and "more than its left_out" in refused(d)


def test_a_best_child_left_out_above_a_child_kept_is_refused(written):
    """Kept children are the most probable: one left out above the least of them moves the bound up."""
    d = copy(written)
    i = expanded(d)[0]
    smallest = min(mass(row) for row in children(d, i))
    assert smallest < d["nodes"][i][LEFT]
    d["nodes"][i][BEST] = (smallest + d["nodes"][i][LEFT]) / 2
    message = refused(d)
    assert f"node {i}: best_left_out" in message and "least probable child kept" in message


def test_a_bound_lowered_to_nothing_while_mass_was_left_out_is_refused(written):
    """best_left_out = 0 everywhere would certify answers no file may certify: refused at the first node."""
    d = copy(written)
    for i in expanded(d) + [0]:
        d["nodes"][i][BEST] = 0.0
    assert "node 0: best_left_out is 0 while left_out is" in refused(d)


def test_an_answer_more_probable_than_its_nodes_end_share_is_refused(written):
    """Half as probable again: the total moves by far less than its own check allows (1e-4)."""
    d = copy(written)
    answer = d["answers"][-1]
    node = d["nodes"][answer[0]]
    extra = mass(node) * node[END] * 0.5
    assert extra < 1e-5
    answer[1] = math.log(math.exp(answer[1]) + extra)
    message = refused(d)
    assert f"the answer after node {answer[0]} has probability" in message and "end share" in message


def test_an_end_share_without_its_answer_is_refused(written):
    d = copy(written)
    dropped = min(d["answers"], key=lambda a: a[1])
    d["answers"].remove(dropped)
    assert f"node {dropped[0]}: end_prob is" in refused(d) and "no answer ends after it" in refused(d)


def test_a_cut_before_the_depth_is_refused(written):
    d = copy(written)
    i = expanded(d)[0]
    d["nodes"][i][LEFT] -= 1e-6
    d["nodes"][i][CUT] += 1e-6
    assert f"node {i}: cut is" in refused(d) and "before the depth 3" in refused(d)


def test_mass_left_out_at_the_depth_is_refused(written):
    d = copy(written)
    i = expanded(d, depth_below=False)[0]
    d["nodes"][i][CUT] -= 1e-9
    d["nodes"][i][LEFT] += 1e-9
    assert f"node {i}: left_out is" in refused(d) and "at the depth 3" in refused(d)


def test_a_prefix_not_expanded_that_claims_a_split_is_refused(written):
    d = copy(written)
    i = next(i for i, row in enumerate(d["nodes"]) if len(row) == 4)
    d["nodes"][i] = [*d["nodes"][i], False, 0.0, 1e-7, 0.0, 0.0, None, None]
    assert refused(d).endswith(f"node {i}: left_out is 1e-07, but the node was not expanded, so nothing was "
                               "measured there")


def test_one_prefix_twice_under_a_node_is_refused(written):
    d = copy(written)
    first, second = [i for i, row in enumerate(d["nodes"]) if row[0] == 0][:2]
    d["nodes"][second][1] = d["nodes"][first][1]
    token = d["nodes"][first][1]
    assert f"node {second}: token {token} is already a child of node 0" in refused(d)


def test_expansions_that_are_not_the_nodes_expanded_are_refused(written):
    d = copy(written)
    d["expansions"] += 1
    assert "expansions: 21, but 20 nodes are expanded" in refused(d)


# ---- strategy names: what the app writes, nothing else -------------------------------------------------
@pytest.mark.parametrize("name", ["beam ![a](http://x/x.png)", "[click](http://x)", "", "   ", "beam", "beam 1",
                                  "beam 99", "beam 04", "Beam 4", "beam 4 ", "<b>greedy</b>", "greedy\u202e"])
def test_a_strategy_not_named_as_the_app_names_it_is_refused(written, name):
    d = copy(written)
    d["landings"][1][0] = name
    message = refused(d)
    assert message.startswith("answers file: landing 2: strategy ") and "is not 'greedy' or 'beam W'" in message


def test_every_strategy_the_app_names_is_read(written):
    d = copy(written)
    d["landings"] = [[name, *row[1:]] for name, row in zip(["greedy", "beam 2", "beam 32"], d["landings"])]
    assert [x.strategy for x in from_json(json.dumps(d)).landings] == ["greedy", "beam 2", "beam 32"]


# ---- bombs: counts bounded before anything is ranked ----------------------------------------------------
def test_landings_past_greedy_and_six_widths_are_refused_before_any_is_read(written):
    d = copy(written)
    d["landings"] = [d["landings"][0]] * 150_000
    assert refused(d) == "answers file: landings: 150,000 of them, more than greedy and 6 beam widths"


def test_one_strategy_placed_twice_is_refused(written):
    d = copy(written)
    d["landings"].append(d["landings"][0])
    assert refused(d) == "answers file: landings: one strategy is placed twice"


def test_sample_outcomes_past_the_samples_drawn_are_refused_before_any_is_read(written):
    d = copy(written)
    d["samples"]["outcomes"] += [[[5], "x", True, -3.0, 0]] * 235_000
    assert "samples, outcomes: 235," in refused(d) and "more than the 8 samples drawn" in refused(d)


@pytest.mark.parametrize("count", [0, -1, 9])
def test_an_outcome_count_outside_one_to_n_is_refused(written, count):
    d = copy(written)
    d["samples"]["outcomes"][0][4] = count
    assert "outcome 1: a count from 1 to 8 (the samples drawn)" in refused(d)


def test_one_outcome_listed_twice_is_refused(written):
    d = copy(written)
    outcomes = d["samples"]["outcomes"]
    outcomes[1] = [*outcomes[0][:4], outcomes[1][4]]        # the counts still add up to n
    assert refused(d) == "answers file: samples: one outcome is listed twice"


def test_answers_past_one_per_expanded_node_are_refused(written):
    d = copy(written)
    d["answers"] += [d["answers"][0]] * 50
    assert "answers: 70 of them, more than one per expanded node (20)" in refused(d)


def test_a_seed_past_what_a_run_takes_is_refused(written):
    d = copy(written)
    d["samples"]["seed"] = 2**63
    assert "samples, seed: expected a whole number up to" in refused(d)
    d["samples"]["seed"] = -1
    assert "samples, seed: must be a whole number from 0 to 2**63 - 1" in refused(d)


# ---- ranks by bisection are ranks by counting -------------------------------------------------------------
def test_rank_by_bisection_counts_the_answers_more_probable():
    rng = random.Random(4)
    logprobs = sorted((rng.choice([-1.0, -2.0, -2.0000004, -3.5, -7.0]) - rng.random() * 1e-7 for _ in range(300)),
                      reverse=True)
    answers = tuple(Answer(i, (i,), "", lp) for i, lp in enumerate(logprobs))
    tree = AnswerTree((), TreeSettings(), (), answers, 0, 0, 0.0)
    for x in [0.0, -1.0, -1.0000005, -2.0, -2.0000002, -3.5 - 1e-6, -7.0, -50.0, -math.inf]:
        assert tree.rank_of(x) == 1 + sum(1 for lp in logprobs if lp > x + 1e-6), x
    assert tree.answer_for((5,), "") is answers[5] and tree.answer_for((999,), "") is None
