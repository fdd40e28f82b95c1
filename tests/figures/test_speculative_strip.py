"""The rounds strip of Speculative decoding, on rounds built by hand: a round that fits on a line is never split
over two, its number reads at the size of the boxes' texts, and a round with no draft is a plain step, not a
bonus."""
from __future__ import annotations

from engine.trace.records import DraftCheck, Round
from figures.speculative import GOLD, PER_LINE, STATUS_COLOURS, rounds_strip

LABELS = {key: key for key in (*STATUS_COLOURS, "round", "draft", "title")}


def a_round(index: int, drafts: int, kind: str = "bonus") -> Round:
    checks = [DraftCheck(token_id=5 + j, text=f"t{j}", q=0.5, p=0.5, u=None, status="kept") for j in range(drafts)]
    return Round(index=index, first_step=index * 5, drafts=checks, next_id=9, next_text="n", next_kind=kind,
                 next_candidates=[], target_passes=1, draft_passes=drafts)


def box_rows(fig) -> dict:
    """round number -> the set of rows (y) its boxes are drawn on."""
    rows: dict = {}
    for trace in fig.data:
        if trace.mode == "markers+text":
            for (number, _), y in zip(trace.customdata, trace.y):
                rows.setdefault(number, set()).add(y)
    return rows


def test_no_round_is_split_over_two_lines():
    rounds = [a_round(i, 4) for i in range(7)]              # 5 boxes a round, a gap between: 14 a line wraps one
    rows = box_rows(rounds_strip(rounds, LABELS))
    assert len(rows) == 7 and all(len(r) == 1 for r in rows.values()), rows
    assert len({y for r in rows.values() for y in r}) == 4           # 2 whole rounds a line (5 + 1 + 5 of 14)


def test_a_round_longer_than_a_line_still_wraps():
    rows = box_rows(rounds_strip([a_round(0, PER_LINE + 3)], LABELS))
    assert len(rows[1]) == 2


def test_round_numbers_are_as_large_as_the_boxes_texts():
    fig = rounds_strip([a_round(i, 2) for i in range(3)], LABELS)
    text_size = next(t.textfont.size for t in fig.data if t.mode == "markers+text")
    assert [a.text for a in fig.layout.annotations] == ["1", "2", "3"]
    assert all(a.font.size >= text_size for a in fig.layout.annotations)


def test_a_round_with_no_draft_is_a_plain_step_not_a_bonus():
    fig = rounds_strip([a_round(0, 2), a_round(1, 0)], LABELS)
    drawn = {t.name: list(t.customdata) for t in fig.data if t.mode == "markers+text"}
    assert [2, "-"] in [list(c) for c in drawn["plain"]]
    assert all(list(c) != [2, "-"] for c in drawn["bonus"])
    assert STATUS_COLOURS["plain"] != GOLD
