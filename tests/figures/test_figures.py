"""Figures and page helpers on small hand-built traces: every expected number is worked out by hand."""
from __future__ import annotations

import math

import pytest

from engine import DecodeConfig, Sequence, Trace
from trace_builders import STEP, beam_trace
from trace_builders import candidate as cand, figure_step as step
from engine.decoding.rerank import rerank
from figures.beam_tree import WORDS as BEAM_WORDS, beam_tree_figure, best_path
from figures.candidates import CUT, candidates_figure
from figures.compare import lanes_figure
from ui.token_view import TokenView, prob_colour, rank_colour, token_html, tokens_of


class TestCandidatesFigure:
    def test_bars_line_and_threshold(self):
        fig = candidates_figure(STEP, DecodeConfig(strategy="sample", top_p=0.75))
        raw, shaped = fig.data[0], fig.data[1]
        assert list(raw.y) == [0.5, 0.3, 0.2]
        assert list(shaped.y) == [0.625, 0.375, 0.0]
        assert raw.marker.color[2] == CUT and shaped.marker.color[2] == CUT       # cut token greyed
        assert raw.marker.color[0] != CUT
        assert list(raw.marker.line.width) == [0, 3, 0]                           # chosen outlined
        cumulative = next(d for d in fig.data if d.type == "scatter" and d.mode == "lines+markers")
        assert [round(v, 9) for v in cumulative.y] == [0.5, 0.8, 1.0]
        threshold = next(d for d in fig.data if d.type == "scatter" and d.mode == "lines")
        assert list(threshold.y) == [0.75, 0.75]

    def test_labels_are_visible_and_escaped(self):
        fig = candidates_figure(STEP)
        ticks = list(fig.layout.xaxis.ticktext)
        assert ticks == ["1. ␣the", "2. &lt;b&gt;", "3. ⏎"]
        assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
        assert fig.layout.yaxis2.title.text

    def test_no_threshold_for_greedy(self):
        fig = candidates_figure(STEP, DecodeConfig(strategy="greedy", top_p=0.5))
        assert not any(d.type == "scatter" and d.mode == "lines" for d in fig.data)


# ---- a hand-built beam tree, 2 beams, eos id 0 ---------------------------------------------------
#            root
#   step 0:  A(kept, -0.5)  B(kept, -1.0)  C(pruned, -2.0)  <eos>(pruned rank 4, -2.5)
#   step 1:  A.x(kept,-1.0) B.<eos>(finished rank 2, -1.4, len 2) A.y(kept, -1.6) B.z(pruned, -3.0)
#   step 2:  A.x.<eos>(finished rank 1, -1.9, len 3) ... A.y.w(pruned rank 3) A.y.v(pruned rank 4)
def values(arr) -> list:
    """A trace's coordinates without the gaps (None or NaN) between line segments."""
    return [v for v in (list(arr) if arr is not None else []) if v is not None and not math.isnan(v)]


class TestBeamTree:
    def test_best_path_and_hover_formula(self):
        trace = beam_trace()
        assert best_path(trace) == [0, 1, 5, 9]
        fig = beam_tree_figure(trace, length_penalty=2.0)
        best = next(d for d in fig.data if d.name == BEAM_WORDS["best"])
        assert values(best.x) == [0, 1, 1, 2, 2, 3]
        finished = next(d for d in fig.data if d.name == BEAM_WORDS["finished"])
        hover = next(h for h in finished.hovertext if "step 2" in h)
        # node 6: cum -1.4, length 2, lp 2 -> -1.4 / 4 = -0.35
        assert "−1.400 / 2^2 = −0.350" in hover
        assert "&lt;eos&gt;" in hover and "<eos>" not in hover

    def test_children_never_cross(self):
        fig = beam_tree_figure(beam_trace())
        y = {}
        for d in fig.data:
            if d.type == "scatter" and "markers" in d.mode and d.hovertext is not None and d.name != "prompt":
                for xv, yv, h in zip(d.x, d.y, d.hovertext):
                    y[(xv, h.split("<br>")[0])] = yv
        # at step 1 (x=2), the children of A (x, y) sit above the children of B (<eos>, z) in one block each
        col = sorted((yv, key[1]) for key, yv in y.items() if key[0] == 2)
        order = [name for _, name in col]
        assert order == ["<b>x</b>", "<b>y</b>", "<b>&lt;eos&gt;</b>", "<b>z</b>"]

    def test_growing_and_collapsing(self):
        trace = beam_trace()
        fig = beam_tree_figure(trace, upto_step=0)
        xs = {x for d in fig.data for x in values(d.x)}
        assert xs == {0, 1}
        folded = beam_tree_figure(trace, collapse_above=3)
        marker = next(d for d in folded.data if d.name == "pruned (folded)")
        assert any(h.startswith("+2 pruned") for h in marker.hovertext)     # w and v under y


class TestRerank:
    def test_scores_by_hand(self):
        # hypotheses: 4 (<eos> step 0, pruned rank 4 > beams: not a hypothesis), 6, 9, 10
        r = rerank(beam_trace(), 1.0)
        # scores -0.7, -0.6333, -0.7: 9 first, then the tie 6 / 10 (-2.1 / 3 rounds just below -0.7)
        assert [h.node_id for h in r.hypotheses] == [9, 6, 10]
        assert {h.node_id for h in r.hypotheses if h.in_set} == {9, 6}
        scores = {h.node_id: h.score for h in r.hypotheses}
        assert scores[6] == pytest.approx(-0.7)
        assert scores[9] == pytest.approx(-1.9 / 3)
        assert scores[10] == pytest.approx(-0.7)

    def test_order_changes_with_length_penalty(self):
        r0 = rerank(beam_trace(), 0.0)        # raw cum: 6 (-1.4) > 9 (-1.9) > 10 (-2.1)
        assert [h.node_id for h in r0.hypotheses] == [6, 9, 10]
        r2 = rerank(beam_trace(), 2.0)        # -1.4/4=-0.35, -1.9/9=-0.211, -2.1/9=-0.233
        assert [h.node_id for h in r2.hypotheses] == [9, 10, 6]
        assert {h.node_id for h in r2.hypotheses if h.in_set} == {9, 10}
        assert r2.set_changed                 # lp 1 keeps {9, 6}: -0.633 and -0.7 beat -0.7 (tie -> earlier)


class TestTokenView:
    def test_escaped_and_coloured(self):
        html = token_html([TokenView("<script>", 1.0, 1, 0), TokenView(" &amp;", 0.0, 150, 1),
                           TokenView("\n", 0.5, 5, 2)], mode="rank", current_step=1)
        assert "<script>" not in html and "&lt;script&gt;" in html
        assert "&amp;amp;" in html
        assert "⏎<br>" in html
        assert rank_colour(1) in html and rank_colour(150) in html

    def test_buckets_and_hue(self):
        assert rank_colour(1) != rank_colour(2) == rank_colour(10) != rank_colour(11) == rank_colour(100)
        assert rank_colour(101) == rank_colour(10**6) != rank_colour(100)
        assert prob_colour(0.0).startswith("hsl(0,") and prob_colour(1.0).startswith("hsl(120,")

    def test_tokens_of_beam_trace_follow_best_path(self):
        toks = tokens_of(beam_trace())
        assert [t.text for t in toks] == ["A", "x", "<eos>"]
        assert toks[1].prob == pytest.approx(math.exp(-0.5))


class TestCompare:

    def test_cumulative_logprob_lines(self):
        config = DecodeConfig(strategy="greedy", max_new_tokens=2)
        steps = [step(0, [cand(7, "a", 0.5, 1, 0.5)], 7, "a"), step(1, [cand(8, "b", 0.25, 1, 0.25)], 8, "b")]
        trace = Trace(model="hand", prompt="p", prompt_token_ids=[1], config=config, steps=steps,
                      sequences=[Sequence(token_ids=[7, 8], text="ab", cum_logprob=math.log(0.125), score=0.0)])
        fig = lanes_figure([("greedy", trace)], {"greedy": None})
        assert list(fig.data[0].y) == pytest.approx([math.log(0.5), math.log(0.125)])
        assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text


def test_figure_html_is_standalone():
    from ui.export import figure_html

    html = figure_html(candidates_figure(STEP))
    assert "<html>" in html and "plotly" in html.lower() and len(html) > 1_000_000     # plotly.js inlined


@pytest.mark.parametrize("lp", [0.0, 0.5, 1.0, 2.0, -1.0])
def test_rerank_predicts_a_new_search(llama, lp):
    """When the replay says nothing changes, a real search with the new penalty returns the re-ranked winner."""
    from engine import decode

    base = DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=10, length_penalty=1.0)
    trace = decode(llama, "The capital of France is", base)
    prediction = rerank(trace, lp)
    again = decode(llama, "The capital of France is", base.replace(length_penalty=lp))
    if not prediction.needs_new_search:
        winner = next(h for h in prediction.hypotheses if h.in_set)
        assert again.best.node_id == winner.node_id
        assert again.best.score == pytest.approx(winner.score, rel=1e-5)
    else:
        assert prediction.stop_changed or prediction.set_changed


def test_finished_nodes_are_real_hypotheses(bundled):
    """A node marked finished ended in EOS or at the length limit (regression: float32 ties with empty slots)."""
    from engine import decode

    config = DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=8, length_penalty=0.0)
    trace = decode(bundled, "The capital of France is", config)
    for n in trace.nodes:
        if n.status == "finished":
            assert n.token_id in bundled.eos_token_ids or n.length == config.max_new_tokens, n


@pytest.mark.parametrize("stop_after", [None, 3])
def test_the_searchs_own_length_penalty_never_asks_for_a_new_search(llama, stop_after):
    """Re-ranked under the penalty it was searched with, a search (whole, or stopped after a few steps) is the
    search itself: nothing changes, nothing to search again."""
    from engine.service import DecodeService

    config = DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=10, length_penalty=1.0)
    on_step = None if stop_after is None else (lambda lane, step: step.index < stop_after - 1)
    trace = DecodeService().decode(llama, "The capital of France is", config, on_step=on_step)
    assert len(trace.steps) == (stop_after or len(trace.steps))
    same = rerank(trace, 1.0)
    assert not same.stop_changed and not same.set_changed
