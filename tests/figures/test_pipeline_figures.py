"""The stage, lens and escape figures on hand-built records: every number written out here."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine import Candidate, Stage, StageToken, Step
from engine.explain.escape import COLUMNS, EscapeGrid
from engine.inside.lens import Lens, LensCell
from figures.escape import BEST, escape_figure, run_cell
from figures.lens import FIRST, lens_figure
from figures.stages import CHOSEN, WORDS, stage_label, stages_figure
from engine import DecodeConfig


def cand(token_id, text, prob, rank):
    return Candidate(token_id=token_id, text=text, logit=math.log(prob), prob=prob, logprob=math.log(prob), rank=rank,
                     shaped_prob=0.0, kept=True)


# raw 0.5 / 0.3 / 0.2; temperature 0.5 squares and renormalises: 25/38, 9/38, 4/38; top-k 2 drops "<b>"
STAGES = [Stage("temperature", 0.5, 3, 0, 0.0, [25 / 38, 9 / 38, 4 / 38], 7, " the", 25 / 38),
          Stage("top_k", 2.0, 2, 1, 4 / 38, [25 / 34, 9 / 34, 0.0], 7, " the", 25 / 34,
                cut=[StageToken(5, "<b>", 4 / 38)])]
STEP = Step(index=0, candidates=[cand(7, " the", 0.5, 1), cand(9, " a", 0.3, 2), cand(5, "<b>", 0.2, 3)],
            entropy=1.0, shaped_entropy=0.5, removed_mass=0.2, kept_count=2, chosen_ids=[9], chosen_texts=[" a"],
            stages=STAGES)


def test_stage_lines_follow_each_candidate_through_the_stages():
    fig = stages_figure(STEP)
    assert [list(line.y) for line in fig.data] == [[0.5, 25 / 38, 25 / 34], [0.3, 9 / 38, 9 / 34], [0.2, 4 / 38, 0.0]]
    assert list(fig.layout.xaxis.ticktext) == ["raw", "temperature 0.5<br>kept 3", "top-k 2<br>kept 2"]
    assert fig.data[1].line.color == CHOSEN and fig.data[0].line.color != CHOSEN
    assert "&lt;b&gt;" in fig.data[2].name                # token text shown literally, never as markup


def test_many_stages_keep_their_ticks_level_and_the_legend_above():
    """Nine stages at 1280 px: each tick's setting on its own line, level ticks, a vocabulary-sized count short."""
    many = [Stage(name=name, value=0.5, kept_count=kept, cut_count=0, removed_mass=0.0, probs=[0.5, 0.3, 0.2],
                  top_id=9, top_text=" a", top_prob=0.5) for name, kept in
            [("penalties", 49152), ("dry", 49152), ("top_n_sigma", 32), ("top_k", 32), ("typical_p", 11),
             ("top_p", 7), ("min_p", 7), ("xtc", 4), ("temperature", 4)]]
    fig = stages_figure(Step(**{**STEP.__dict__, "stages": many}),
                        texts={"penalties": "penalties {value}", "dry": "DRY {value}", "top_n_sigma": "top-nσ {value}",
                               "typical_p": "typical {value}", "xtc": "XTC ≥ {value}"})
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[1] == "penalties<br>0.5<br>kept 49k" and ticks[3] == "top-nσ<br>0.5<br>kept 32"
    assert ticks[8] == "XTC ≥<br>0.5<br>kept 4"
    assert fig.layout.xaxis.tickangle == 0 and fig.layout.legend.orientation == "h"
    few = stages_figure(STEP)
    assert few.layout.legend.orientation == "v" and few.layout.xaxis.tickangle is None


def lens_of(ranks_by_layer):
    """One step; layer l gives the chosen token rank ranks_by_layer[l] and probability 0.1 * (l + 1)."""
    cells = [[LensCell(top_ids=[1], top_texts=["x"], top_probs=[0.9], chosen_prob=0.1 * (i + 1), chosen_rank=r)]
             for i, r in enumerate(ranks_by_layer)]
    return Lens(steps=[0], chosen_ids=[4], chosen_texts=[" Paris"], cells=cells, max_diff=0.0)


def test_lens_heatmap_and_first_layer_ring():
    lens = lens_of([5, 2, 1, 3, 1])
    assert lens.first_top_layer(0) == 2
    fig = lens_figure(lens, current=0)
    heat = fig.data[0]
    assert [row[0] for row in heat.z] == [0.1, 0.2, 0.30000000000000004, 0.4, 0.5]
    assert list(heat.y) == ["embeddings", "1", "2", "3", "4"]
    ring = fig.data[1]
    assert list(ring.y) == ["2"] and ring.marker.color == FIRST
    assert lens_of([3, 2]).first_top_layer(0) is None
    assert len(lens_figure(lens_of([3, 2])).data) == 1      # no ring when no layer has it on top


def test_escape_grid_marks_the_best_and_the_runs_cell():
    probs = [[0.1 * r + 0.01 * c for c in range(len(COLUMNS))] for r in range(3)]
    probs[1][4] = 0.95
    grid = EscapeGrid(step=4, token_id=3, text=" w", temperatures=[0.7, 1.0, 1.3], columns=list(COLUMNS),
                      probs=probs, run_prob=0.2, recorded_mass=1.0)
    assert grid.best() == (1, 4)
    run = DecodeConfig(strategy="sample", temperature=1.3, top_p=0.8)
    assert run_cell(grid, run) == (2, 2)
    assert run_cell(grid, DecodeConfig(strategy="greedy")) is None
    fig = escape_figure(grid, run)
    best, own = fig.data[1], fig.data[2]
    assert (best.x[0], best.y[0], best.marker.color) == ("min-p 0.05", "1", BEST)
    assert (own.x[0], own.y[0]) == ("top-p 0.8", "1.3")
    assert fig.data[0].text[1][4] == "95%"


def test_a_stage_name_from_a_file_is_text_not_a_template():
    odd = Stage("{0}<b>", 1.0, 3, 0, 0.0, [0.5, 0.3, 0.2], 7, " the", 0.5)
    fig = stages_figure(Step(**{**STEP.__dict__, "stages": [odd]}))
    assert fig.layout.xaxis.ticktext[1].startswith("{0}&lt;b&gt; 1")


def test_a_figure_without_the_pages_words_names_every_stage_in_english():
    """A figure drawn outside the app (an export) names each engine's stage by its English label."""
    odd = Stage("mirostat", 5.0, 3, 0, 0.0, [0.5, 0.3, 0.2], 7, " the", 0.5)
    fig = stages_figure(Step(**{**STEP.__dict__, "stages": [odd]}))
    assert list(fig.layout.xaxis.ticktext) == ["raw", "mirostat τ 5<br>kept 3"]


def test_the_penalties_stage_names_the_settings_that_are_on():
    """llama.cpp's and vLLM's one "penalties" stage holds three settings: its label names those that are on,
    not the repeat penalty's 1 that the stage records."""
    zh = json.loads((Path(__file__).resolve().parents[2] / "assets/texts/zh/pipeline.json").read_text("utf-8"))
    presence = DecodeConfig(strategy="sample", sampler_order="llama.cpp", presence_penalty=0.5)
    both = presence.replace(presence_penalty=0.0, repetition_penalty=1.3, frequency_penalty=0.2)
    stage = Stage("penalties", 1.0, 3, 0, 0.0, [0.5, 0.3, 0.2], 7, " the", 0.5)
    assert stage_label(stage, WORDS, presence) == "penalties: presence 0.5"
    assert stage_label(stage, WORDS, both) == "penalties: repeat 1.3, frequency 0.2"
    names = {key[len("stage_"):]: text for key, text in zh.items() if key.startswith("stage_")}
    assert stage_label(stage, names, presence) == "惩罚组：存在 0.5"
    # with many stages the tick puts each setting on a line of its own
    many = [stage] + [Stage("top_k", 40.0, 3, 0, 0.0, [0.5, 0.3, 0.2], 7, " the", 0.5)] * 5
    ticks = list(stages_figure(Step(**{**STEP.__dict__, "stages": many}), config=both).layout.xaxis.ticktext)
    assert ticks[1] == "penalties:<br>repeat 1.3<br>frequency 0.2<br>kept 3" and ticks[2] == "top-k<br>40<br>kept 3"
    assert list(stages_figure(STEP, config=both).layout.xaxis.ticktext)[1] == "temperature 0.5<br>kept 3"


def test_the_probability_axis_fits_the_lines_drawn():
    """A flat step (every line under 0.06) gets an axis a tenth above its highest point, not 0 to 1 with the
    lines along its floor; a step whose top line reaches 25/34 keeps the lines whole."""
    flat = [cand(i, f" t{i}", p, i) for i, p in enumerate([0.05, 0.04, 0.03], start=1)]
    stage = Stage("top_k", 2.0, 2, 1, 0.03, [0.055, 0.044, 0.0], 1, " t1", 0.055)
    fig = stages_figure(Step(**{**STEP.__dict__, "candidates": flat, "chosen_ids": [2], "stages": [stage]}))
    assert list(fig.layout.yaxis.range) == [0, pytest.approx(0.055 * 1.1)]
    low, high = stages_figure(STEP).layout.yaxis.range
    assert low == 0 and 25 / 34 < high < 1.02
