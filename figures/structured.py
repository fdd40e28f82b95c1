"""Constrained decoding seen step by step: Z_t, the probability the model gave the tokens a grammar allowed.

One bar per step, on a log scale (Z_t spans 1 to 1e-6): a tall bar is a step where the grammar agreed with
the model, a short one a step where it overruled it. Forced steps (the grammar allowed exactly one token)
are drawn in their own colour: there the model had no say at all.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from .labels import for_plotly

FREE = "#4c78a8"
FORCED = "#f58518"
CURRENT = "#e45756"


def feasible_strip(steps: list, labels: dict, current: int | None = None) -> go.Figure:
    """steps: [Step] of a constrained decode (each with .grammar). labels: 'title', 'x', 'y', 'forced', 'free',
    'hover' (with {token}, {z}, {allowed}). current: the 0-based step picked below, outlined."""
    xs = [s.index + 1 for s in steps]
    zs = [max(s.grammar.feasible_mass, 1e-12) for s in steps]
    colors = [FORCED if s.grammar.forced else FREE for s in steps]
    lines = [CURRENT if s.index == current else c for s, c in zip(steps, colors)]
    hover = [labels["hover"].format(token=for_plotly(s.chosen_texts[0]), z=f"{s.grammar.feasible_mass:.4g}",
                                    allowed=f"{s.grammar.allowed:,}") for s in steps]
    fig = go.Figure()
    fig.add_bar(x=xs, y=zs, marker=dict(color=colors, line=dict(color=lines, width=[3 if c == CURRENT else 0
                                                                                    for c in lines])),
                text=[for_plotly(s.chosen_texts[0]) for s in steps], textposition="outside", cliponaxis=False,
                hovertext=hover, hoverinfo="text", showlegend=False)
    for name, color in ((labels["free"], FREE), (labels["forced"], FORCED)):   # a legend for the two colours
        fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(color=color, size=12, symbol="square"),
                        name=name)
    low = max(-13.0, min(_log10(z) for z in zs) - 0.5)          # the lowest bar shows, however small
    fig.update_yaxes(type="log", dtick=1, title=labels["y"], range=[low, 0.45])
    fig.update_xaxes(title=labels["x"], dtick=1 if len(steps) <= 30 else None)
    fig.update_layout(title=labels["title"], height=360, margin=dict(t=60, b=50, l=60, r=20),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0), bargap=0.15)
    return fig


def _log10(value: float) -> float:
    return math.log10(max(value, 1e-12))
