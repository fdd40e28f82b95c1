"""Figures for the teacher-forcing page: the scored reference, KL after divergence, the eps curve.

Pure functions of engine.inside.teacher records; the page passes the translated words in `labels`.
"""
from __future__ import annotations

import plotly.graph_objects as go

from .labels import for_plotly

BLUE, ORANGE, GREEN, GREY, RED = "#1f77b4", "#ff7f0e", "#2ca02c", "#bdbdbd", "#d62728"


def _layout(fig: go.Figure, title: str, height: int = 360) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def _tick(i: int, text: str) -> str:
    """'3:Paris' for the 0-based position i: positions are numbered from 1 on the axis, as on the page."""
    return f"{i + 1}:{for_plotly(text)}"


def _tops(neighbours: list) -> str:
    return "<br>".join(f"{for_plotly(n.text)} {n.value:.3f}" for n in neighbours)


def reference_bars(teacher, labels: dict, divergence: int | None = None) -> go.Figure:
    """Probability of each reference token given the true prefix; green where it is the top choice."""
    pos = teacher.positions
    fig = go.Figure(go.Bar(
        x=[_tick(p.index, p.text) for p in pos], y=[p.prob for p in pos], showlegend=False,
        marker_color=[GREEN if p.rank == 1 else BLUE for p in pos],
        customdata=[[p.rank, p.entropy, _tops(p.top)] for p in pos],
        hovertemplate="%{x}<br>" + labels["prob"] + " %{y:.4f}<br>" + labels["rank"] + " %{customdata[0]}<br>"
                      + labels["entropy"] + " %{customdata[1]:.3f}<br>" + labels["top"]
                      + "<br>%{customdata[2]}<extra></extra>"))
    if divergence is not None and divergence < len(pos):
        fig.add_vline(x=divergence, line_dash="dash", line_color=RED, annotation_text=labels["divergence"])
    fig.update_yaxes(title=labels["prob"], range=[0, 1])
    fig.update_xaxes(type="category", tickangle=-60)
    return _layout(fig, labels["title"], height=380)


def kl_lines(comparison: list, labels: dict) -> go.Figure:
    """KL(true-prefix || own-prefix) per position, with p(reference token | own prefix)."""
    xs = [_tick(d.index, d.true_text) for d in comparison]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=[d.kl for d in comparison], name=labels["kl"], marker_color=ORANGE,
                         customdata=[[for_plotly(d.own_text), _tops(d.own_top), _tops(d.true_top)] for d in comparison],
                         hovertemplate="%{x}<br>" + labels["kl"] + " %{y:.3f}<br>" + labels["own_token"]
                                       + " %{customdata[0]}<br><b>" + labels["own"] + "</b><br>%{customdata[1]}<br><b>"
                                       + labels["true"] + "</b><br>%{customdata[2]}<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[d.own_prob_of_true for d in comparison], name=labels["own_prob"],
                             mode="lines+markers", yaxis="y2", line=dict(color=BLUE),
                             hovertemplate="%{x}<br>" + labels["own_prob"] + " %{y:.4f}<extra></extra>"))
    fig.update_layout(yaxis=dict(title=labels["kl"], rangemode="tozero"),
                      yaxis2=dict(title=labels["own_prob"], overlaying="y", side="right", range=[0, 1]))
    fig.update_xaxes(type="category", tickangle=-60)
    return _layout(fig, labels["title"], height=380)


def swap_strip(teacher, run, labels: dict) -> go.Figure:
    """One cell per position: the input fed there, orange where it came from the model."""
    pos = teacher.positions
    x = [_tick(p.index, p.text) for p in pos]
    fig = go.Figure(go.Bar(
        x=x, y=run.logprobs, showlegend=False,
        marker_color=[ORANGE if s else GREY for s in run.swapped],
        customdata=[[labels["swapped"] if s else labels["kept"], for_plotly(teacher_text)]
                    for s, teacher_text in zip(run.swapped, run.input_texts)],
        hovertemplate="%{x}<br>" + labels["logprob"] + " %{y:.3f}<br>%{customdata[0]}: %{customdata[1]}"
                      "<extra></extra>"))
    fig.update_yaxes(title=labels["logprob"])
    fig.update_xaxes(type="category", tickangle=-60)
    return _layout(fig, labels["title"], height=340)


def epsilon_curve(runs: list, labels: dict, teacher_logprob: float, free_logprob: float | None = None) -> go.Figure:
    """log p(reference) as eps goes from 0 (teacher forcing) to 1 (free running), same coins for all."""
    fig = go.Figure(go.Scatter(
        x=[r.epsilon for r in runs], y=[r.logprob for r in runs], mode="lines+markers", name=labels["curve"],
        customdata=[[sum(r.swapped), len(r.swapped)] for r in runs],
        hovertemplate="eps %{x:.2f}<br>" + labels["logprob"] + " %{y:.2f}<br>" + labels["swapped"]
                      + " %{customdata[0]}/%{customdata[1]}<extra></extra>"))
    fig.add_hline(y=teacher_logprob, line_dash="dot", line_color=GREEN, annotation_text=labels["teacher"],
                  annotation_position="top left")
    if free_logprob is not None:
        fig.add_hline(y=free_logprob, line_dash="dot", line_color=RED, annotation_text=labels["free"],
                      annotation_position="bottom right")
    fig.update_xaxes(title="eps", range=[-0.02, 1.02])
    fig.update_yaxes(title=labels["logprob"])
    return _layout(fig, labels["title"], height=360)
