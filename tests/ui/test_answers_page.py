"""Whole answers in AppTest on the tiny Llama: the ledger's metrics add up, the ranked table holds the tree's
answers with their exact probabilities, the figure's heights are the probabilities, both languages, a link's
settings (a saved run's reader is tested in tests/engine/test_answers_cli.py)."""
from __future__ import annotations

import pytest

from app_helpers import PROMPT, figures, open_app, texts
from engine.answers import TreeSettings
from engine.answers.run import explore
from tiny_models import tiny_llama

pytestmark = [pytest.mark.apptest, pytest.mark.tiny, pytest.mark.usefixtures("navigation_frame")]
SMALL = {"wa_depth": 3, "wa_budget": 24, "wa_branch": 3, "wa_samples": 8}


def number(shown: str) -> float:
    """A probability as the page writes it: '12.34%', '3.10e-05' or '1 − 2.00e-05'."""
    if shown.startswith("1 − "):
        return 1 - float(shown[4:])
    return float(shown[:-1]) / 100 if shown.endswith("%") else float(shown)


def test_ledger_table_and_figure_agree_with_the_engine(tiny_loads):
    at = open_app("answers", params=SMALL)
    want = explore(tiny_llama(), PROMPT, TreeSettings(depth=3, budget=24, branch=3), beams=(1, 4), samples=8)
    en = texts("answers")
    metrics = {m.label: m.value for m in at.metric}
    shown = [number(metrics[en[k]]) for k in ("m_answers", "m_prefixes", "m_left_out")]
    ledger = want.tree.ledger
    assert shown == pytest.approx([ledger.answers, ledger.prefixes, ledger.left_out], abs=6e-5)
    assert sum(shown) == pytest.approx(1, abs=2e-4)
    table = at.dataframe[0].value
    assert list(table[en["col_prob"]])[:5] == pytest.approx([a.prob for a in want.tree.answers[:5]], rel=1e-6)
    # the icicle's answer bars are the answers' probabilities; all bars of one column add up to at most 1
    fig = figures(at)[0]
    answer_bars = next(tr for tr in fig["data"] if tr["name"] == en["kind_answer"])
    assert sorted(answer_bars["y"], reverse=True)[:3] == pytest.approx([a.prob for a in want.tree.answers[:3]],
                                                                       rel=1e-6)
    columns: dict = {}
    for trace in fig["data"]:
        for x, y in zip(trace["x"], trace["y"]):
            columns[x] = columns.get(x, 0) + y
    assert columns[1] == pytest.approx(1, abs=1e-9) and all(v <= 1 + 1e-9 for v in columns.values())


def test_chinese_and_a_link_that_sets_every_setting(tiny_loads):
    params = {**SMALL, "lang": "zh", "wa_dist": "sampler", "wa_temperature": 0.7, "wa_beams": "2,8"}
    at = open_app("answers", params=params)
    zh = texts("answers", "zh")
    assert at.title[0].value == zh["title"]
    assert at.session_state["wa_dist"] == "sampler" and at.session_state["wa_temperature"] == pytest.approx(0.7)
    assert any(zh["about_sampler"] in c.value for c in at.caption)
    assert sum(1 for m in at.markdown if "束宽 8" in m.value) == 1
