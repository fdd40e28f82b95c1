"""The beam tree recorded by the search: root at the left, one column per step.

Every continuation the search ranked is a node. Within a column, nodes are ordered by
their parent's position and then by rank, so no two edges cross. Kept nodes are solid,
pruned ones faint, finished (EOS / length) hypotheses are diamonds, and the best
sequence is traced in a strong colour. Colour = cumulative logprob. Past `collapse_above`
nodes, the pruned children of each parent fold into one "+n pruned" marker.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from engine.decoding.beam import beam_score

from .labels import for_plotly
from .words import english

BEST = "#e45756"
EDGE = "rgba(128,128,128,0.55)"
EDGE_PRUNED = "rgba(128,128,128,0.2)"
COLOURSCALE = "Viridis"

WORDS = english("beam", "fig_", ("title", "x", "y", "kept", "pruned", "finished", "best", "collapsed", "colour",
                                 "prompt", "step", "logprob", "cum", "score", "rank", "beam", "status"))


def best_path(trace, node_id: int | None = None) -> list:
    """Node ids from the root to node_id (default: the best sequence's leaf)."""
    path = trace.path(trace.best.node_id if node_id is None else node_id)
    root = next((n.id for n in trace.nodes if n.parent is None), None)
    return [root] + [n.id for n in path] if path and root is not None else []


def _arr(values: list) -> np.ndarray:
    """Floats with NaN for None (a gap between line segments, or a missing value)."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


LABEL_CHARS = 9
ROW_PAD = 0.8         # rows of room beyond the outermost nodes, where their labels go


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """A node's token as a label: at most `limit` characters, then an ellipsis (the hover has it whole)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _fmt(x: float) -> str:
    return "−∞" if x is None or math.isinf(x) else f"{x:.3f}".replace("-", "−")


def beam_tree_figure(trace, upto_step: int | None = None, length_penalty: float | None = None,
                     collapse_above: int = 600, labels_up_to: int = 24, texts: dict | None = None) -> go.Figure:
    """The tree up to `upto_step` (default: all). Scores in the hover use `length_penalty`
    (default: the search's own)."""
    words = dict(WORDS, **(texts or {}))
    lp = trace.config.length_penalty if length_penalty is None else length_penalty
    last = max((n.step for n in trace.nodes), default=-1)
    upto = last if upto_step is None else min(upto_step, last)
    nodes = [n for n in trace.nodes if n.step <= upto]
    root = next((n for n in nodes if n.parent is None), None)
    fig = go.Figure()
    if root is None:
        fig.update_layout(title=dict(text=words["title"].format(beams=trace.config.num_beams, steps=0)))
        return fig
    highlight = _highlighted(trace, upto, last)
    y, folded, max_rows = _rows(nodes, root, upto, len(nodes) > collapse_above, highlight)
    _add_edges(fig, nodes, y, folded, highlight, words)
    _add_nodes(fig, trace, [n for n in nodes if n.parent is not None and n.id in y], y, lp,
               show_labels=upto + 1 <= labels_up_to, words=words)
    _add_folded(fig, folded, words)
    # the label runs right from the root, drawn whole: centred on it, half of it fell left of the plot, where a
    # tree of many steps leaves almost no room (80 steps cut "prompt" to "ompt")
    fig.add_scatter(x=[0], y=[0], mode="markers+text", name=words["prompt"], text=[words["prompt"]],
                    textposition="top right", cliponaxis=False, marker=dict(symbol="square", size=12, color="#888"),
                    hovertext=[for_plotly(trace.prompt[-200:])], hoverinfo="text", showlegend=False)
    _lay_out(fig, words["title"].format(beams=trace.config.num_beams, steps=upto + 1), upto, max_rows, words)
    return fig


def _highlighted(trace, upto: int, last: int) -> set:
    """The path to highlight: the best sequence once the search is shown to its end, else the best running
    beam at the shown step."""
    if upto >= last:
        return set(best_path(trace))
    running = trace.steps[upto].beam_node_ids if upto < len(trace.steps) else []
    return set(best_path(trace, running[0])) if running else set()


def _rows(nodes: list, root, upto: int, collapse: bool, highlight: set) -> tuple:
    """Each node's row, column by column: children under their parent's row, best rank first, centred on 0.
    With `collapse`, a parent's pruned children (off the highlighted path) share one folded mark.
    Returns (row by node id, [(x, row, parent id, [pruned nodes])] for the folds, the most rows in a column)."""
    y = {root.id: 0.0}
    by_step: dict = {}
    for n in nodes:
        if n.parent is not None:
            by_step.setdefault(n.step, []).append(n)
    folded = []
    max_rows = 1
    for t in range(0, upto + 1):
        column = by_step.get(t, [])
        if collapse:
            shown = [n for n in column if n.status != "pruned" or n.id in highlight]
            groups: dict = {}
            for n in column:
                if n.status == "pruned" and n.id not in highlight:
                    groups.setdefault(n.parent, []).append(n)
            items = [(y.get(n.parent, 0.0), n.rank, n) for n in shown]
            items += [(y.get(p, 0.0), min(c.rank for c in kids), ("fold", p, kids)) for p, kids in groups.items()]
        else:
            items = [(y.get(n.parent, 0.0), n.rank, n) for n in column]
        items.sort(key=lambda item: (item[0], item[1]))
        max_rows = max(max_rows, len(items))
        for i, (_, _, item) in enumerate(items):
            pos = i - (len(items) - 1) / 2
            if isinstance(item, tuple):
                folded.append((t + 1, pos, item[1], item[2]))
            else:
                y[item.id] = pos
    return y, folded, max_rows


def _add_edges(fig, nodes: list, y: dict, folded: list, highlight: set, words: dict) -> None:
    """Parent-to-child lines in three kinds (pruned faint, kept grey, the highlighted path bold)."""
    by_id = {n.id: n for n in nodes}
    lines = {"kept": ([], []), "pruned": ([], []), "best": ([], [])}
    for n in nodes:
        if n.parent is None or n.id not in y:
            continue
        kind = "best" if n.id in highlight else ("pruned" if n.status == "pruned" else "kept")
        xs, ys = lines[kind]
        xs += [by_id[n.parent].step + 1, n.step + 1, None]
        ys += [y[n.parent], y[n.id], None]
    for x, pos, parent, _ in folded:
        xs, ys = lines["pruned"]
        xs += [x - 1, x, None]
        ys += [y.get(parent, 0.0), pos, None]
    lines = {k: (_arr(xs), _arr(ys)) for k, (xs, ys) in lines.items()}
    fig.add_scatter(x=lines["pruned"][0], y=lines["pruned"][1], mode="lines", line=dict(color=EDGE_PRUNED, width=1),
                    hoverinfo="skip", showlegend=False)
    fig.add_scatter(x=lines["kept"][0], y=lines["kept"][1], mode="lines", line=dict(color=EDGE, width=1.5),
                    hoverinfo="skip", showlegend=False)
    fig.add_scatter(x=lines["best"][0], y=lines["best"][1], mode="lines", line=dict(color=BEST, width=4),
                    name=words["best"], hoverinfo="skip")


def _add_nodes(fig, trace, drawn: list, y: dict, lp: float, *, show_labels: bool, words: dict) -> None:
    """One marker group per status, coloured by cumulative logprob; the hover shows the score worked out."""
    # one colour scale for the whole search, so a colour means the same score in every frame of Play
    finite = [n.cum_logprob for n in trace.nodes if n.parent is not None and n.cum_logprob is not None
              and math.isfinite(n.cum_logprob)]
    cmin, cmax = (min(finite), max(finite)) if finite else (-1.0, 0.0)
    if cmin == cmax:
        cmin -= 1.0

    def hover(n) -> str:
        s = beam_score(n.cum_logprob, n.length, lp)
        return (f"<b>{for_plotly(n.text)}</b><br>{words['step']} {n.step + 1} · "
                f"{words['status']}: {words.get(n.status, n.status)}"
                f"<br>{words['logprob']}: {_fmt(n.logprob)}<br>{words['cum']}: {_fmt(n.cum_logprob)}"
                f"<br>{words['score']} = cum / length^lp = {_fmt(n.cum_logprob)} / {n.length}^{lp:g} = {_fmt(s)}"
                f"<br>{words['rank']} {n.rank} · {words['beam']} {n.beam + 1}")   # slots counted from 1

    styles = (("kept", "circle", 11, 1.0), ("pruned", "circle", 7, 0.3), ("finished", "diamond", 14, 1.0))
    first = True
    for status, symbol, size, opacity in styles:
        group = [n for n in drawn if n.status == status]
        if not group:
            continue
        labelled = show_labels and status != "pruned"
        fig.add_scatter(
            x=np.array([n.step + 1 for n in group]), y=np.array([y[n.id] for n in group]),
            mode="markers+text" if labelled else "markers", name=words[status],
            text=np.array([for_plotly(short_label(n.text)) for n in group], dtype=object) if labelled else None,
            # neighbouring columns put their labels on opposite sides, so long words do not run into each other
            textposition=["top center" if n.step % 2 == 0 else "bottom center" for n in group],
            textfont=dict(size=11), cliponaxis=False,     # a label at the edge is drawn whole, never cut
            marker=dict(symbol=symbol, size=size, opacity=opacity, color=_arr([n.cum_logprob for n in group]),
                        colorscale=COLOURSCALE, cmin=cmin, cmax=cmax,
                        line=dict(width=2 if status == "finished" else 0.5,
                                  color=BEST if status == "finished" else "#777"),
                        showscale=first, colorbar=dict(title=dict(text=words["colour"]), x=1.0, xanchor="left",
                                                       xpad=12, thickness=14) if first else None),
            hovertext=np.array([hover(n) for n in group], dtype=object), hoverinfo="text")
        first = False


def _add_folded(fig, folded: list, words: dict) -> None:
    """One ✕ per folded group of pruned children; the hover lists the first eight."""
    if not folded:
        return
    fig.add_scatter(x=[f[0] for f in folded], y=[f[1] for f in folded], mode="markers", name=words["collapsed"],
                    marker=dict(symbol="x-thin", size=8, line=dict(width=1.5, color="rgba(128,128,128,0.8)")),
                    hovertext=[f"+{len(kids)} {words['pruned']}: " + ", ".join(
                        f"{for_plotly(k.text)} ({_fmt(k.cum_logprob)})" for k in kids[:8])
                        for _, _, _, kids in folded],
                    hoverinfo="text")


def _lay_out(fig, title: str, upto: int, max_rows: int, words: dict) -> None:
    """Axes, height by the most rows in a column, and room around the tree for its labels."""
    height = int(min(max(380, 40 * max_rows + 160), 900))
    edge = (max_rows - 1) / 2                 # rows sit at -edge, ..., edge
    fig.update_layout(
        title=dict(text=title, y=0.98, yref="container", yanchor="top"),
        # room right of the last column for its labels, so the colour bar never covers them
        xaxis=dict(title=dict(text=words["x"]), tickmode="linear", dtick=1 if upto < 30 else 5,
                   range=[-0.8, upto + 2.0], zeroline=False),
        # rank 1 on top; room above the top row and below the bottom row for their labels
        yaxis=dict(title=dict(text=words["y"]), showticklabels=False, zeroline=False, showgrid=False,
                   range=[edge + ROW_PAD, -edge - ROW_PAD]),
        height=height, margin=dict(l=60, r=90, t=100, b=60), hovermode="closest",
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0, xanchor="left"),
    )
