"""Figures in front of a class, on hand-built records: beam slots numbered from 1 on the KV cache page and in
the beam tree, the beam tree's outermost labels inside its plot, notes on charts that read at 4.5:1 on the
white page of a saved figure, and a Step by step legend whose entries stay short."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import plotly.io as pio
import pytest

from engine import DecodeConfig
from engine.inside.kv_trace import BeamCache, CacheStep, PagedBlock
from figures.beam_tree import WORDS as BEAM_WORDS, beam_tree_figure
from figures.candidates import candidates_figure
from figures.kv import cache_rows, paged_blocks
from figures.teacher import reference_bars
from trace_builders import STEP, beam_trace

ROOT = Path(__file__).resolve().parents[2]

ROW_LABELS = {"reused": "reused", "appended": "appended", "copied": "copied", "beam": "Beam", "parent": "parent",
              "rows": "rows", "title": "rows"}
BLOCK_LABELS = {"beam": "Beam", "block": "block", "refs": "refs", "beams": "beams", "tokens": "tokens",
                "position": "position", "title": "blocks"}

# three beam slots after a reorder: slot 0 and slot 1 both continue slot 0's prefix, slot 2 its own.
# Paged (block size 2): block 0 [5, 6] is shared by all three; each slot then has a block of its own.
CACHE_STEP = CacheStep(
    step=2,
    beams=[BeamCache(slot=0, parent=0, tokens=[5, 6, 7], reused=2, appended=1, copied=0),
           BeamCache(slot=1, parent=0, tokens=[5, 6, 8], reused=0, appended=0, copied=3),
           BeamCache(slot=2, parent=2, tokens=[5, 6, 9], reused=2, appended=1, copied=0)],
    rows=9, bytes=900,
    paged_blocks=[PagedBlock(index=0, tokens=[5, 6], refs=3, beams=[0, 1, 2], full=True),
                  PagedBlock(index=1, tokens=[7], refs=1, beams=[0], full=False),
                  PagedBlock(index=1, tokens=[8], refs=1, beams=[1], full=False),
                  PagedBlock(index=1, tokens=[9], refs=1, beams=[2], full=False)],
    paged_tables=[[0, 1], [0, 2], [0, 3]], paged_bytes=800)


class TestOneNumbering:
    def test_cache_rows_name_slots_and_parents_from_1(self):
        fig = cache_rows(CACHE_STEP, ROW_LABELS)
        for bar in fig.data:
            assert list(bar.y) == ["Beam 1", "Beam 2", "Beam 3"]
            assert list(bar.customdata) == [1, 1, 3]     # slot 2 (the second) continues slot 1 (the first)
        assert "Beam 0" not in fig.to_json()

    def test_paged_lines_and_block_hover_count_beams_from_1(self):
        tokens = {5: "a", 6: "b", 7: "c", 8: "d", 9: "e"}
        fig = paged_blocks(CACHE_STEP, tokens, BLOCK_LABELS)
        assert [d.name for d in fig.data if d.mode == "lines"] == ["Beam 1", "Beam 2", "Beam 3"]
        blocks = next(d for d in fig.data if d.name == "block")
        assert [row[1] for row in blocks.customdata] == ["1, 2, 3", "1", "2", "3"]

    def test_beam_tree_hover_names_the_parent_slot_from_1(self):
        # every hand-built node came from slot 0, the first beam
        fig = beam_tree_figure(beam_trace())
        hovers = [h for d in fig.data if d.name in (BEAM_WORDS["kept"], BEAM_WORDS["finished"]) for h in d.hovertext]
        assert hovers and all(h.endswith("from beam 1") for h in hovers)


class TestBeamTreeEdges:
    def test_outer_rows_leave_room_for_their_labels(self):
        fig = beam_tree_figure(beam_trace())
        ys = [y for d in fig.data if d.mode and "markers" in d.mode for y in d.y]
        low, high = sorted(fig.layout.yaxis.range)
        # half a row or more beyond the outermost nodes (rows are one unit apart), at the top and the bottom
        assert low <= min(ys) - 0.5 and high >= max(ys) + 0.5
        assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]        # still rank 1 on top
        labelled = [d for d in fig.data if d.mode == "markers+text" and d.name != "prompt"]
        assert labelled and all(d.cliponaxis is False for d in labelled)


def luminance(hex_colour: str) -> float:
    def channel(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast_on_white(hex_colour: str) -> float:
    return 1.05 / (luminance(hex_colour) + 0.05)


PLOTLY_JS_TEXT = "#444444"      # plotly.js draws text in this colour when nothing else names one


def note_colours(fig) -> list:
    """The colour each annotation's text is drawn in on a saved figure: its own, else the layout's, else the
    default template's (plotly's own, or the one Streamlit installs, which names none), else plotly.js's."""
    default = pio.templates[pio.templates.default].layout.font.color or PLOTLY_JS_TEXT
    return [note.font.color or fig.layout.font.color or default for note in fig.layout.annotations]


class TestNotesReadOnWhite:
    def test_top_p_and_chosen_notes(self):
        fig = candidates_figure(STEP, DecodeConfig(strategy="sample", top_p=0.75, temperature=0.7))
        assert len(fig.layout.annotations) == 2
        assert all(contrast_on_white(c) >= 4.5 for c in note_colours(fig)), note_colours(fig)

    def test_first_divergence_note(self):
        positions = [SimpleNamespace(index=i, text=w, prob=p, rank=r, entropy=1.0, top=[])
                     for i, (w, p, r) in enumerate([(" a", 0.6, 1), (" b", 0.1, 3)])]
        labels = {"prob": "p", "rank": "rank", "entropy": "H", "top": "top", "divergence": "first divergence",
                  "title": "t"}
        fig = reference_bars(SimpleNamespace(positions=positions), labels, divergence=1)
        assert [n.text for n in fig.layout.annotations] == ["first divergence"]
        assert contrast_on_white(note_colours(fig)[0]) >= 4.5


class TestCandidatesLegend:
    def test_the_temperature_note_rides_on_the_top_p_line_not_in_the_legend(self):
        words = {"cumulative": "cumulative", "threshold": "top-p = {p}", "after_temperature": " (after T)"}
        fig = candidates_figure(STEP, DecodeConfig(strategy="sample", top_p=0.75, temperature=0.7), texts=words)
        assert [d.name for d in fig.data if d.showlegend is not False] == ["raw probability", "after the strategy",
                                                                           "cut by truncation", "cumulative"]
        assert "top-p = 0.75 (after T)" in [n.text for n in fig.layout.annotations]
        plain = candidates_figure(STEP, DecodeConfig(strategy="sample", top_p=0.75), texts=words)
        assert "top-p = 0.75" in [n.text for n in plain.layout.annotations]         # no temperature, no note

    @pytest.mark.parametrize("lang", ["en", "zh"])
    def test_the_temperature_caveat_comes_in_lines_a_phone_holds(self, lang):
        """The whole caveat, in lines of at most 30 columns (a Chinese character takes two): on one line it ran
        off the left edge of a 390-pixel phone's plot."""
        import json

        from figures.labels import display_width

        step = json.loads((ROOT / "assets" / "texts" / lang / "step.json").read_text(encoding="utf-8"))
        words = {"threshold": step["fig_threshold"], "after_temperature": step["fig_after_temperature"]}
        fig = candidates_figure(STEP, DecodeConfig(strategy="sample", top_p=0.9, temperature=0.7), texts=words)
        note = next(n.text for n in fig.layout.annotations if n.text.startswith("top-p = 0.9"))
        lines = note.split("<br>")
        whole = "top-p = 0.9" + step["fig_after_temperature"]
        assert len(lines) >= 2 and all(display_width(line) <= 30 for line in lines), lines
        assert "".join(lines).replace(" ", "") == whole.replace(" ", "")
