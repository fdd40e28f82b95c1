"""Figures for the expected-embedding page: nearest tokens, the 2-D projection, the lane, tau.

Pure functions of engine records; the page passes the translated words in `labels`.
Every token text goes through figures.labels.
"""
from __future__ import annotations

import plotly.graph_objects as go

from .labels import for_plotly

BLUE, ORANGE, GREY, RED = "#1f77b4", "#ff7f0e", "#9e9e9e", "#d62728"


def _layout(fig: go.Figure, title: str, height: int = 360) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=50, b=10), showlegend=True,
                      legend=dict(orientation="h", y=-0.15))
    return fig


def neighbour_bars(neighbours: list, value_label: str, title: str, highlight_id: int | None = None,
                   range_max: float | None = None) -> go.Figure:
    """Horizontal bars for [Neighbour] (best on top); `highlight_id` drawn in orange."""
    names = [f"{for_plotly(n.text)}  #{n.token_id}" for n in neighbours][::-1]
    values = [n.value for n in neighbours][::-1]
    colours = [ORANGE if n.token_id == highlight_id else BLUE for n in neighbours][::-1]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker_color=colours,
                           text=[f"{v:.3f}" for v in values], textposition="outside", textangle=0, cliponaxis=False,
                           hovertemplate="%{y}<br>" + value_label + " %{x:.4f}<extra></extra>", showlegend=False))
    fig.update_xaxes(title=value_label, range=[min(0.0, min(values, default=0)), range_max] if range_max else None)
    fig.update_yaxes(type="category")
    return _layout(fig, title, height=340)


def projection_scatter(projection, labels: dict) -> go.Figure:
    """e (a star) among its nearest tokens (blue) and the mixture's heaviest tokens (orange)."""
    fig = go.Figure()
    groups = ((True, labels["nearest"], BLUE, "circle"), (False, labels["heavy"], ORANGE, "diamond"))
    for nearest, name, colour, symbol in groups:
        pts = [p for p in projection.tokens if p.nearest == nearest]
        if not pts:
            continue
        fig.add_trace(go.Scatter(
            x=[p.x for p in pts], y=[p.y for p in pts], mode="markers+text", name=name,
            text=[for_plotly(p.text) for p in pts], textposition="top center",
            marker=dict(color=colour, size=10, symbol=symbol),
            customdata=[[p.cosine, p.weight, p.token_id] for p in pts],
            hovertemplate="%{text} #%{customdata[2]}<br>" + labels["cosine"] + " %{customdata[0]:.3f}<br>"
                          + labels["weight"] + " %{customdata[1]:.4f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[projection.x], y=[projection.y], mode="markers+text", name=labels["e"],
                             text=["e"], textposition="bottom center",
                             marker=dict(color=RED, size=18, symbol="star"),
                             hovertemplate=labels["e"] + "<extra></extra>"))
    fig.update_xaxes(title=labels["pc1"], zeroline=False)
    fig.update_yaxes(title=labels["pc2"], zeroline=False)
    return _layout(fig, labels["title"], height=420)


def lane_lines(steps: list, labels: dict, difference: int | None = None) -> go.Figure:
    """Per soft step: cosine of e to its nearest token, and the entropy of p (second axis).

    Steps are drawn numbered from 1; `difference` is a 0-based step index, as in the trace."""
    xs = [s.index + 1 for s in steps if s.feedback is not None]
    fb = [s.feedback for s in steps if s.feedback is not None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[f.nearest_cosine for f in fb], name=labels["cosine"], mode="lines+markers",
                             customdata=[for_plotly(f.nearest[0].text) for f in fb],
                             hovertemplate=labels["step"] + " %{x}<br>" + labels["cosine"]
                                           + " %{y:.3f} (%{customdata})<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[f.entropy for f in fb], name=labels["entropy"], mode="lines+markers",
                             yaxis="y2", line=dict(color=ORANGE),
                             hovertemplate=labels["step"] + " %{x}<br>" + labels["entropy"]
                                           + " %{y:.3f}<extra></extra>"))
    if difference is not None:
        fig.add_vline(x=difference + 1, line_dash="dash", line_color=RED, annotation_text=labels["difference"])
    fig.update_layout(yaxis=dict(title=labels["cosine"], range=[0, 1.05]),
                      yaxis2=dict(title=labels["entropy"], overlaying="y", side="right", rangemode="tozero"))
    fig.update_xaxes(title=labels["step"])
    return _layout(fig, labels["title"], height=360)


def tau_curve(points: list, labels: dict, current: float | None = None) -> go.Figure:
    """Largest weight of one Gumbel-softmax draw as tau shrinks (log x axis); 1 means one-hot."""
    fig = go.Figure(go.Scatter(
        x=[p.tau for p in points], y=[p.top_weight for p in points], mode="lines+markers", name=labels["top_weight"],
        customdata=[for_plotly(p.top[0].text) for p in points],
        hovertemplate="tau %{x:.3g}<br>" + labels["top_weight"] + " %{y:.4f} (%{customdata})<extra></extra>"))
    if current is not None:
        fig.add_vline(x=current, line_dash="dash", line_color=RED)
    fig.update_xaxes(type="log", title="tau", autorange="reversed", tickvals=[p.tau for p in points],
                     ticktext=[f"{p.tau:g}" for p in points])
    fig.update_yaxes(title=labels["top_weight"], range=[0, 1.05])
    return _layout(fig, labels["title"], height=340)
