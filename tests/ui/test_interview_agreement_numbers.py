"""What the agreement cards say about their demos holds on the bundled chat model: each link's own settings,
run the way Whole answers runs them (batches of 16, greedy and the link's beam, its samples with seed 0)."""
from __future__ import annotations

import pytest

from engine.answers import TreeSettings
from engine.answers.agreement import agree
from engine.answers.run import explore
from ui.interview_agreement import CARDS, HAIKU, NUMBER

pytestmark = pytest.mark.bundled


def run_link(lm, card: str, index: int = 0):
    _, page, settings = CARDS[card][index]
    assert page == "answers" and settings["chat"] == "1" and settings["wa_dist"] == "model"
    tree = TreeSettings(depth=int(settings["wa_depth"]), budget=int(settings["wa_budget"]),
                        branch=int(settings["wa_branch"]), batch=16)
    beams = (1, *sorted(int(b) for b in settings["wa_beams"].split(",")))
    run = explore(lm, settings["prompt"], tree, chat=True, beams=beams, samples=int(settings["wa_samples"]), seed=0)
    return settings, run, agree(run, [settings["wa_mbr"]], int(settings["wa_mbr_k"]))


def test_the_number_demos(bundled):
    settings, run, agreement = run_link(bundled, "best")
    assert settings["prompt"] == NUMBER
    # 'its most likely answer is “12”, outside the range it was given'
    assert agreement.candidates[agreement.mode].text == "12" == run.tree.answers[0].text
    # 'the MBR box and the mode box show the same answer with the same number' (exact tokens)
    settings, run, agreement = run_link(bundled, "mbr")
    r = agreement.results["exact"]
    assert r.winner == agreement.mode and r.lower[r.winner] == r.upper[r.winner] == agreement.candidates[0].prob


def test_the_empty_answer_demo(bundled):
    settings, run, agreement = run_link(bundled, "empty")
    assert settings["prompt"] == HAIKU
    # 'the most likely answer the tree finds is the empty one, and the tree cannot certify it: the mass it has not
    # reached is far larger'
    mode = agreement.candidates[agreement.mode]
    assert mode.text == "" and not agreement.mode_certified
    assert run.tree.ledger.answers < 1 - 1000 * mode.prob
    # 'under chrF the empty answer agrees with no other answer, so its expected utility is only its own probability'
    assert agreement.results["chrf"].lower[agreement.mode] == pytest.approx(mode.prob)
