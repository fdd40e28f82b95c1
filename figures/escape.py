"""The way out of a loop as a grid: temperature (rows) x truncation (columns).

Each cell is the probability that, at the loop's first repeated step, sampling with
that setting takes a token other than the one that repeated. The best cell has a ring,
the run's own setting (when it is in the grid) a dotted square.
"""
from __future__ import annotations

import plotly.graph_objects as go

from .words import english

WORDS = english("pipeline", "escape_fig_", ("x", "y", "z", "none", "top_p", "min_p", "best", "run", "title",
                                                "hover"))
BEST = "#e45756"
RUN = "#333333"


def column_label(kind: str, value: float, words: dict) -> str:
    return words["none"] if kind == "none" else words[kind].format(value=f"{value:g}")


def escape_figure(grid, config=None, *, texts: dict | None = None) -> go.Figure:
    """`grid`: an engine.explain.escape.EscapeGrid; `config`: the run's DecodeConfig, to mark its own cell."""
    words = dict(WORDS, **(texts or {}))
    columns = [column_label(k, v, words) for k, v in grid.columns]
    rows = [f"{t:g}" for t in grid.temperatures]
    hover = [[words["hover"].format(t=rows[r], c=columns[c], p=f"{grid.probs[r][c]:.3f}")
              for c in range(len(columns))] for r in range(len(rows))]
    fig = go.Figure(go.Heatmap(z=grid.probs, x=columns, y=rows, zmin=0, zmax=1, colorscale="Greens",
                               text=[[f"{p:.0%}" for p in row] for row in grid.probs], texttemplate="%{text}",
                               hovertext=hover, hoverinfo="text", textfont=dict(size=13),
                               colorbar=dict(title=dict(text=words["z"]))))
    r, c = grid.best()
    fig.add_scatter(x=[columns[c]], y=[rows[r]], mode="markers", name=words["best"], hoverinfo="name",
                    marker=dict(symbol="circle-open", size=34, color=BEST, line=dict(width=3)))
    own = run_cell(grid, config)
    if own is not None:
        fig.add_scatter(x=[columns[own[1]]], y=[rows[own[0]]], mode="markers", name=words["run"], hoverinfo="name",
                        marker=dict(symbol="square-open", size=38, color=RUN, line=dict(width=2)))
    fig.update_layout(
        title=dict(text=words["title"].format(step=grid.step + 1), y=0.97, yref="container", yanchor="top"),
        height=360, margin=dict(l=70, r=20, t=80, b=60),
        xaxis=dict(title=dict(text=words["x"]), type="category"),
        yaxis=dict(title=dict(text=words["y"]), type="category"),
        legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0, xanchor="left"))
    return fig


def run_cell(grid, config) -> tuple | None:
    """(row, column) of the run's own sampling setting, when the grid holds it."""
    if config is None or config.strategy != "sample" or config.temperature not in grid.temperatures:
        return None
    if config.top_p < 1.0 and config.min_p > 0.0:
        return None
    kind, value = (("top_p", config.top_p) if config.top_p < 1.0
                   else ("min_p", config.min_p) if config.min_p else ("none", 0.0))
    if (kind, value) not in grid.columns:
        return None
    return grid.temperatures.index(config.temperature), grid.columns.index((kind, value))
