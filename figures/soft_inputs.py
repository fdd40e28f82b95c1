"""Figures for the feed-back rules (engine.soft_inputs): per-step measures as small multiples, and the probes.

Pure functions of traces and records; the page passes the translated words in `labels`. Steps are drawn numbered
from 1, as on every page.
"""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots



def _name(text: str) -> str:
    """A lane's name (the page's own words) safe in Plotly's HTML subset; spaces stay spaces."""
    return html.escape(text, quote=False).replace("%{", "%&#123;")

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
MEASURES = ("cosine", "norm_ratio", "participation", "entropy")


def _value(step, measure: str) -> float:
    fed = step.fed
    if measure == "cosine":
        return fed.emitted_cosine
    if measure == "norm_ratio":
        return fed.norm / fed.emitted_norm if fed.emitted_norm > 0 else math.nan
    if measure == "participation":
        return fed.participation
    return fed.entropy


def measure_grid(lanes: list, labels: dict, departures: dict | None = None, cold_stop: float | None = None,
                 selected: int | None = None) -> go.Figure:
    """Four small multiples over the steps, one line per lane that records its fed input: cosine of the fed
    vector to the emitted token's embedding, the ratio of their norms, the participation ratio 1 / sum w^2, and
    the entropy Cold Stop reads (with its threshold as a dashed line). lanes: [(name, trace)];
    departures: name -> the 0-based step where the lane's text first leaves greedy's (an x on the cosine line);
    selected: a 0-based step to mark."""
    fig = make_subplots(rows=2, cols=2, shared_xaxes=True, vertical_spacing=0.14, horizontal_spacing=0.1,
                        subplot_titles=[labels[m] for m in MEASURES])
    departures = departures or {}
    for n, (name, trace) in enumerate(lanes):
        steps = [s for s in trace.steps if s.fed is not None]
        if not steps:
            continue
        colour = COLOURS[n % len(COLOURS)]
        xs = [s.index + 1 for s in steps]
        for k, measure in enumerate(MEASURES):
            ys = [_value(s, measure) for s in steps]
            fig.add_trace(go.Scatter(
                x=xs, y=[None if math.isnan(y) else y for y in ys], mode="lines+markers", name=_name(name),
                legendgroup=name, showlegend=k == 0, line=dict(color=colour, width=2), marker=dict(size=4),
                hovertemplate=_name(name) + "<br>" + labels["step"] + " %{x}<br>" + labels[measure]
                              + " %{y:.3f}<extra></extra>"), row=k // 2 + 1, col=k % 2 + 1)
        split = departures.get(name)
        if split is not None and split < len(trace.steps) and trace.steps[split].fed is not None:
            fig.add_trace(go.Scatter(
                x=[split + 1], y=[_value(trace.steps[split], "cosine")], mode="markers", showlegend=False,
                legendgroup=name, marker=dict(color=colour, size=13, symbol="x"),
                hovertemplate=_name(name) + "<br>" + labels["departure"] + " %{x}<extra></extra>"), row=1, col=1)
    if cold_stop is not None:
        fig.add_hline(y=cold_stop, line_dash="dash", line_color="#555", row=2, col=2,
                      annotation_text=labels["cold_stop"], annotation_position="top right")
    if selected is not None:
        for k in range(len(MEASURES)):
            fig.add_vline(x=selected + 1, line_dash="dot", line_color="#999", row=k // 2 + 1, col=k % 2 + 1)
    fig.update_yaxes(range=[-0.05, 1.05], row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)           # a hidden state is 20 times a token's length
    fig.update_yaxes(type="log", row=2, col=1)
    fig.update_yaxes(rangemode="tozero", row=2, col=2)
    fig.update_xaxes(title=labels["step"], row=2)
    fig.update_layout(title=labels["title"], height=560, margin=dict(l=10, r=10, t=70, b=10),
                      legend=dict(orientation="h", y=-0.16))
    return fig


def probe_bars(rows: list, labels: dict) -> go.Figure:
    """rows: [(lane name, Probe)]. Per lane, JS of the next distribution after the fed vector against after its
    top-1 id and its top-2 id, and the gap between f(mixture) and the mixture of f (none for a hidden state)."""
    names = [_name(name) for name, _ in rows]
    fig = go.Figure()
    series = (("js_top1", COLOURS[0], lambda p: p.js_top1), ("js_top2", COLOURS[1], lambda p: p.js_top2),
              ("gap", COLOURS[2], lambda p: p.gap))
    for key, colour, get in series:
        values = [get(p) for _, p in rows]
        fig.add_trace(go.Bar(x=names, y=[v if v is not None else 0.0 for v in values], name=labels[key],
                             marker_color=colour, text=[f"{v:.3f}" if v is not None else "–" for v in values],
                             textposition="outside", cliponaxis=False,
                             hovertemplate="%{x}<br>" + labels[key] + " %{y:.4f}<extra></extra>"))
    fig.add_hline(y=math.log(2), line_dash="dot", line_color="#999", annotation_text="log 2",
                  annotation_position="top left")
    fig.update_yaxes(title=labels["js"], range=[0, math.log(2) * 1.15])
    fig.update_layout(title=labels["title"], barmode="group", height=380, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.2))
    return fig
