"""What the Interview page's whole-answers cards say about their demos holds on the bundled chat model: each
link's own settings, run the way Whole answers runs them (batches of 16, greedy and the link's beam widths)."""
from __future__ import annotations

import math

import pytest

from engine.answers import TreeSettings
from engine.answers.run import explore
from engine.answers.stops import PRESETS
from ui.interview_answers import CAPITAL, CARDS, HAIKU, SKY

pytestmark = pytest.mark.bundled


def run_link(lm, card: str, index: int = 0):
    _, page, settings = CARDS[card][index]
    assert page == "answers" and settings["chat"] == "1" and settings["wa_dist"] == "model"
    tree = TreeSettings(depth=int(settings["wa_depth"]), budget=int(settings["wa_budget"]),
                        branch=int(settings["wa_branch"]), batch=16, stops=PRESETS[settings.get("wa_stops", "none")])
    beams = (1, *sorted(int(b) for b in settings["wa_beams"].split(",")))
    return settings["prompt"], explore(lm, settings["prompt"], tree, chat=True, beams=beams)


def test_the_mode_card_capital_question(bundled):
    prompt, run = run_link(bundled, "mode")
    assert prompt == CAPITAL
    tree, ledger = run.tree, run.tree.ledger
    mode = tree.answers[0]
    # 'its most likely answer, certified, is the full sentence ... with about 4 %' (3.88 % in float32)
    assert mode.text == "The capital of France is Paris." and tree.certified_count >= 1
    assert 0.03 < mode.prob < 0.05
    # 'all the complete answers the tree finds add up to only a little more'
    assert mode.prob < ledger.answers < 1.25 * mode.prob
    # 'most of [the rest] in the tokens left out'
    assert ledger.left_out > (1 - ledger.answers) / 2


def test_the_beam_card_demos(bundled):
    prompt, run = run_link(bundled, "beam", 0)
    assert prompt == CAPITAL
    # 'greedy and the beams of width 2, 4 and 8 all land on the same answer, rank 1 and certified'
    assert [x.strategy for x in run.landings] == ["greedy", "beam 2", "beam 4", "beam 8"]
    assert all(x.complete and x.rank == 1 and x.exact_rank for x in run.landings)
    prompt, run = run_link(bundled, "beam", 1)
    assert prompt == HAIKU
    # 'none of them ends within 8 tokens, and the most likely answer found (not certified) is the empty one'
    assert len(run.landings) == 4 and not any(x.complete for x in run.landings)
    assert run.tree.answers[0].text == "" and run.tree.certified_count == 0
    prompt, run = run_link(bundled, "beam", 2)
    assert prompt == SKY
    # 'greedy lands on the most likely answer, "No" (about 17 %), while beam search of width 2, 4 and 8 ends on a
    # complete answer that is not it: "No, the sky is not blue", rank 3 among all answers and certified, under 2 %'
    top = run.tree.answers[0]
    assert top.text == "No" and 0.15 < top.prob < 0.19
    greedy, *beams = run.landings
    assert (greedy.text, greedy.complete, greedy.rank, greedy.exact_rank) == ("No", True, 1, True)
    assert [(x.strategy, x.text, x.complete, x.rank, x.exact_rank) for x in beams] == [
        (f"beam {w}", "No, the sky is not blue", True, 3, True) for w in (2, 4, 8)]
    assert all(0.01 < math.exp(x.logprob) < 0.02 for x in beams) and run.tree.certified_count >= 3
    assert top.prob / math.exp(beams[0].logprob) > 9
