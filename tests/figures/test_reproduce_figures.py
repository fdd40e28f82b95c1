"""The figure of "Same prompt, another answer", on studies built from hand-made logits: each strip cell says what
happened at that step (never another token where the tokens agree), a change of exactly 0 stays off the log axis,
exact ties are drawn as such, and the fragile steps are the shaded ones."""
from __future__ import annotations

import torch

from engine.reproduce.compare import compare
from engine.reproduce.runs import Run, RunSpec
from engine.reproduce.settings import StudySettings
from engine.reproduce.study import Study, closest_call
from figures.reproduce import STATES, cell_states, fragile_steps, study_figure

LABELS = {key: key for key in ("same", "bits", "token", "after", "fragile", "margin", "delta", "delta_hover",
                               "margin_hover", "tie", "tie_hover", "all_zero", "closest", "step", "value", "title")}
LABELS["cell"] = "{step} {token} {state} {delta} {margin}"
TEXTS = ["a", "b", "<b>c</b>", "d"]


def run(rows, tokens=None, size=1) -> Run:
    logits = torch.tensor(rows, dtype=torch.float32)
    return Run(RunSpec(batch_size=size), tokens if tokens is not None else logits.argmax(-1).tolist(), logits)


def study_of(*runs) -> Study:
    comparisons = [compare(runs[0], r) for r in runs]
    study = Study("m", "p", [1], StudySettings(), list(runs), comparisons, [""] * len(runs))
    study.closest = closest_call(comparisons)
    return study


REFERENCE = [[3.0, 1.0, 0.0, 0.0], [1.0, 1.0 - 2**-20, 0.0, 0.0], [0.0, 0.0, 2.0, 2.0], [5.0, 0.0, 0.0, 0.0]]


def heatmap(fig):
    return next(trace for trace in fig.data if trace.type == "heatmap")


def test_strip_cells_follow_the_runs():
    same = run(REFERENCE)
    bits = run([[3.0 + 2**-20, 1.0, 0.0, 0.0], *REFERENCE[1:]])
    flipped = run([REFERENCE[0], [1.0 - 2**-19, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0], REFERENCE[3]])
    study = study_of(run(REFERENCE), same, bits, flipped)
    assert cell_states(study.comparisons[1]) == ["same"] * 4
    assert cell_states(study.comparisons[2]) == ["bits", "same", "same", "same"]
    assert cell_states(study.comparisons[3]) == ["same", "token", "after", "after"]
    fig = study_figure(study, ["alone", "again", "bits", "flip"], TEXTS, LABELS)
    z = heatmap(fig).z
    token = STATES.index("token")
    assert [token in row for row in z] == [False, False, False, True]
    assert fragile_steps(study) == [1]                    # the near-tie that flipped; the exact tie moved nothing
    shaded = [shape for shape in fig.layout.shapes if shape.type == "rect"]
    assert sorted({(s.x0, s.x1) for s in shaded}) == [(1.5, 2.5)]
    assert "&lt;b&gt;c&lt;/b&gt;" in heatmap(fig).customdata[0][2]      # a token's text is shown literally


def test_zero_changes_stay_off_the_log_axis_and_ties_are_marked():
    study = study_of(run(REFERENCE), run(REFERENCE))
    fig = study_figure(study, ["alone", "again"], TEXTS, LABELS)
    names = [trace.name for trace in fig.data]
    assert "delta" not in names                           # no line for a run that changed nothing
    assert any(a.text == "all_zero" for a in fig.layout.annotations)
    tie = next(trace for trace in fig.data if trace.name == "tie")
    assert list(tie.x) == [3]                              # step 3's top two are equal
    margin = next(trace for trace in fig.data if trace.name == "margin")
    assert 3 not in list(margin.x) and fig.layout.yaxis2.type == "log"
    assert list(heatmap(fig).text[1]) == [""] * 4     # nothing fragile when nothing moved


def test_changes_are_drawn_where_they_are_not_zero():
    moved = run([[3.0, 1.0 + 2**-18, 0.0, 0.0], REFERENCE[1], REFERENCE[2], [5.0, 0.0, 2**-10, 0.0]])
    study = study_of(run(REFERENCE), moved)
    fig = study_figure(study, ["alone", "moved"], TEXTS, LABELS)
    line = next(trace for trace in fig.data if trace.name == "delta")
    assert list(line.x) == [1, 4] and list(line.y) == [2**-18, 2**-10]
