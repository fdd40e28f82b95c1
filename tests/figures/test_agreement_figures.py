"""The agreement figures on hand-built answers: bars are the probabilities and the bounds worked out here, marks
sit on the right rows, two answers with one text stay two rows, markup in an answer stays text."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from engine.answers.agreement import Evidence, Known, clusters_of, expectation
from figures.agreement import MARKS, twin_bars, utility_heatmap

pytestmark = pytest.mark.tiny
LABELS = {"p": "p", "expected": "E", "estimate": "est", "lower": "lo", "upper": "hi", "empty": "∅",
          "mode": "mode", "beam": "beam", "majority": "majority", "mbr": "MBR", "row": "h", "column": "y", "u": "u"}


def hand_built():
    """Example A of the reference notes: London .30, Paris .25, Paris. .15, paris .10, Lyon .05, 0.15 not found;
    plus a second 'Lyon' of other tokens and an answer that is markup."""
    answers = [Known((1,), "London", math.log(.30), ("tree", "greedy")), Known((2,), "Paris", math.log(.25)),
               Known((2, 3), "Paris.", math.log(.15)), Known((4,), "paris", math.log(.10), ("tree", "sample"), 3),
               Known((5,), "Lyon", math.log(.03)), Known((6, 7), "Lyon", math.log(.01)),
               Known((8,), "<b>x</b>", math.log(.01))]
    evidence = Evidence(tuple(answers), 1 - sum(a.prob for a in answers))
    r = expectation("text", answers, evidence)
    majority = SimpleNamespace(answer=answers[3])
    return SimpleNamespace(candidates=tuple(answers), evidence=evidence, results={"text": r}, mode=0,
                           majority=majority)


def test_twin_bars_hold_probabilities_and_bounds_by_hand():
    agreement = hand_built()
    fig = twin_bars(agreement, "text", LABELS)
    probs, expected = fig.data[0], fig.data[1]
    assert list(probs.x) == pytest.approx([.30, .25, .15, .10, .03, .01, .01])
    # the Paris group holds .25 + .15 + .10 = .50 found; .15 is not found (it may join any group)
    assert list(expected.x) == pytest.approx([.30, .50, .50, .50, .04, .04, .01])
    tops = [lo + d for lo, d in zip(expected.x, expected.error_x.array)]
    assert tops == pytest.approx([.45, .65, .65, .65, .19, .19, .16])
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks[0].startswith(MARKS["mode"] + MARKS["beam"]) and MARKS["mbr"] in ticks[1]
    assert MARKS["majority"] in ticks[3] and ticks[4] == ticks[5] == " Lyon"      # two rows, one text
    assert "&lt;b&gt;" in ticks[6] and "<b>" not in ticks[6]
    assert agreement.results["text"].certified           # .50 beats London's .45 and Lyon's .19


def test_heatmap_is_the_matrix_and_groups_add_up():
    agreement = hand_built()
    fig = utility_heatmap(agreement, "text", LABELS)
    assert [list(row) for row in fig.data[0].z] == [list(row) for row in agreement.results["text"].matrix]
    groups = {c.key: (len(c.members), c.mass, c.votes) for c in clusters_of(agreement.evidence)}
    assert groups["paris"] == (3, pytest.approx(.50), 3) and groups["lyon"][0] == 2
