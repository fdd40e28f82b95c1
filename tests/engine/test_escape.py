"""Loop escape probabilities on hand-made traces, worked out with pencil-and-paper formulas."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from engine.explain.escape import escape_grid
from trace_builders import ESCAPE_P as P, confident, make_step, make_trace, loop_with

def powered(probs, temperature):
    """softmax(log p / T) by hand: p^(1/T) renormalised."""
    w = [p ** (1 / temperature) for p in probs]
    return [x / sum(w) for x in w]


def cell(grid, temperature, kind, value=0.0):
    return grid.probs[grid.temperatures.index(temperature)][grid.columns.index((kind, value))]


def test_whole_vocabulary_recorded():
    grid = escape_grid(loop_with(make_step(9, list(zip([20, 31, 32, 33], P)), chosen=20), vocab_size=4))
    assert (grid.step, grid.token_id, grid.recorded_mass) == (9, 20, pytest.approx(1.0))
    assert cell(grid, 1.0, "none") == pytest.approx(0.5)
    assert cell(grid, 2.0, "none") == pytest.approx(1 - math.sqrt(0.5) / sum(math.sqrt(p) for p in P))
    assert cell(grid, 0.7, "none") == pytest.approx(1 - powered(P, 0.7)[0])
    # top-p 0.8 at T = 1: 0.5 + 0.25 < 0.8, so 0.15 joins; 0.1 is cut
    assert cell(grid, 1.0, "top_p", 0.8) == pytest.approx(1 - 0.5 / 0.9)
    # top-p 0.5 at T = 1: the loop token alone holds 0.5: no way out
    assert cell(grid, 1.0, "top_p", 0.5) == pytest.approx(0.0)
    # min-p 0.1 at T = 1: the bar is 0.1 * 0.5 = 0.05, every token stays
    assert cell(grid, 1.0, "min_p", 0.1) == pytest.approx(0.5)
    # at T = 1.3, min-p 0.2: p^(1/1.3) renormalised, bar = 0.2 * the top; 0.1's share is below it
    q = powered(P, 1.3)
    kept = [x for x in q if x >= 0.2 * q[0]]
    assert cell(grid, 1.3, "min_p", 0.2) == pytest.approx(1 - q[0] / sum(kept))
    assert cell(grid, 2.0, "none") > cell(grid, 1.0, "none") > cell(grid, 0.7, "none")
    assert grid.run_prob == pytest.approx(0.5)           # the run sampled at T = 1, nothing cut
    row, column = grid.best()
    assert (grid.temperatures[row], grid.columns[column]) == (2.0, ("none", 0.0))
    better = grid.config_for(make_trace([confident(0, 1)]).config, row, column)
    assert (better.strategy, better.temperature, better.top_p, better.min_p) == ("sample", 2.0, 1.0, 0.0)


def test_unrecorded_mass_is_spread_over_the_other_tokens():
    # three of six tokens recorded (0.9 of the mass); each of the other three holds 0.1 / 3
    grid = escape_grid(loop_with(make_step(9, list(zip([20, 31, 32], P[:3])), chosen=20), vocab_size=6))
    assert grid.recorded_mass == pytest.approx(0.9)
    full = P[:3] + [0.1 / 3] * 3
    assert cell(grid, 1.0, "none") == pytest.approx(0.5)
    assert cell(grid, 2.0, "none") == pytest.approx(1 - powered(full, 2.0)[0])
    # top-p 0.95 at T = 1: 0.5 + 0.25 + 0.15 = 0.9, then one 0.0333 token: 0.9333 < 0.95, a second: 0.9667
    assert cell(grid, 1.0, "top_p", 0.95) == pytest.approx(1 - 0.5 / (0.9 + 2 * 0.1 / 3), abs=1e-5)


def test_greedy_run_and_repetition_penalty():
    # greedy with penalty 1.2: w20 is in the context; its logit log 0.5 < 0 is multiplied by 1.2
    step = make_step(9, list(zip([20, 31, 32, 33], P)), chosen=20)
    grid = escape_grid(loop_with(step, vocab_size=4, strategy="greedy", repetition_penalty=1.2))
    penalised = [0.5 ** 1.2, 0.25, 0.15, 0.1]         # exp(1.2 log 0.5) = 0.435: still the argmax
    assert cell(grid, 1.0, "none") == pytest.approx(1 - penalised[0] / sum(penalised))
    assert cell(grid, 2.0, "none") == pytest.approx(1 - powered(penalised, 2.0)[0])
    assert grid.run_prob == 0.0                       # greedy keeps taking w20
    # with penalty 3 w20 falls to 0.125, below w31: greedy itself would have left the loop
    flipped = escape_grid(loop_with(step, vocab_size=4, strategy="greedy", repetition_penalty=3.0))
    assert flipped.run_prob == 1.0


def test_no_loop_or_no_token_draw_gives_no_grid():
    assert escape_grid(make_trace([confident(i, 40 + i) for i in range(10)])) is None
    step = make_step(9, list(zip([20, 31, 32, 33], P)), chosen=20)
    assert escape_grid(loop_with(step, vocab_size=4, strategy="soft")) is None


# ---- with the model: the step's full logits -------------------------------------------------
def by_hand(logits, token, temperature, kind, value):
    """Sampling at `temperature` with one cut-off, written out: sort, keep, renormalise."""
    probs = (logits / temperature).softmax(-1)
    keep = probs > 0
    if kind == "top_p":          # the smallest set of most likely tokens whose mass reaches value
        ordered, order = probs.sort(descending=True)
        before = ordered.cumsum(0) - ordered
        keep = torch.zeros_like(keep)
        keep[order[before < value]] = True
    elif kind == "min_p":
        keep = probs >= value * probs.max()
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return 1 - float(kept[token] / kept.sum())


def test_full_logits_make_the_grid_exact(llama):
    from engine import DecodeConfig, decode
    from engine.explain.escape import step_logits

    trace = decode(llama, "The capital of France is", DecodeConfig(max_new_tokens=8))
    estimate = escape_grid(trace)
    logits = step_logits(llama, trace, estimate.step)
    ids = trace.prompt_token_ids + trace.best.token_ids[:estimate.step]
    with torch.no_grad():
        independent = llama.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    exact = escape_grid(trace, logits=logits)
    assert exact.recorded_mass == 1.0 and estimate.recorded_mass < 1.0
    for r, temperature in enumerate(exact.temperatures):
        for c, (kind, value) in enumerate(exact.columns):
            assert exact.probs[r][c] == pytest.approx(by_hand(independent, exact.token_id, temperature, kind, value),
                                                      abs=1e-4), (temperature, kind, value)
    # at temperature 1 with no cut-off, spreading the unrecorded mass changes nothing: the estimate is exact there
    one = exact.temperatures.index(1.0)
    assert estimate.probs[one][0] == pytest.approx(exact.probs[one][0], abs=1e-5)


def test_a_damaged_trace_gets_no_grid_rather_than_an_error():
    step = make_step(9, list(zip([20, 31, 32, 33], P)), chosen=20)
    broken = dataclasses.replace(step, candidates=[dataclasses.replace(step.candidates[0], prob=0.0)]
                                 + step.candidates[1:])
    assert escape_grid(loop_with(broken, vocab_size=4)) is None
    # an implausible vocabulary size in the file is not believed: the missing mass becomes one other token
    step = make_step(9, list(zip([20, 31, 32], P[:3])), chosen=20)
    for size in (10**12, "many", 2):
        grid = escape_grid(loop_with(step, vocab_size=size))
        two = 1 - powered(P[:3] + [0.1], 2.0)[0]
        assert cell(grid, 2.0, "none") == pytest.approx(two)


def test_the_first_repeat_of_a_one_token_loop_is_its_second_token():
    """5 7 7 7 7 7 7 7: the 7 of step 1 (0-based) is repeated first at step 2. The loop rule reports the unit
    [7, 7] from step 1, whose second copy starts at step 3: one step late."""
    from engine.explain.escape import first_repeat

    assert first_repeat([5, 7, 7, 7, 7, 7, 7, 7]) == (2, 7)
    assert first_repeat([7, 7, 7, 7, 7, 7]) == (1, 7)
    # a two-token unit still repeats after two: w20 w21 from step 7, its second copy at step 9
    assert first_repeat([10, 11, 12, 13, 14, 15, 16, 20, 21, 20, 21, 20, 21, 22]) == (9, 20)
    # a three-token unit whose first two tokens agree: 7 7 8 repeats after three, not after one
    assert first_repeat([7, 7, 8, 7, 7, 8, 7, 7, 8]) == (3, 7)
    assert first_repeat([1, 2, 3, 4, 5, 6]) is None


def test_a_one_token_loop_gets_its_grid_at_its_first_repeated_step():
    """w5 then w7 seven times; step 2 is the first repeat of w7, and its candidates give the grid (T = 1: 1 - 0.5)."""
    ids = [5, 7, 7, 7, 7, 7, 7, 7]
    steps = [confident(i, t) for i, t in enumerate(ids)]
    steps[2] = make_step(2, list(zip([7, 31, 32, 33], P)), chosen=7)
    trace = dataclasses.replace(make_trace(steps), model_facts={"vocab_size": 4})
    grid = escape_grid(trace)
    assert (grid.step, grid.token_id) == (2, 7)
    assert cell(grid, 1.0, "none") == pytest.approx(0.5)
    assert cell(grid, 2.0, "none") == pytest.approx(1 - math.sqrt(0.5) / sum(math.sqrt(p) for p in P))
