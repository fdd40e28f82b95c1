"""Figures for the KV-cache page: each beam's rows, the paged blocks drawn once, bytes over steps.

Pure functions of engine.inside.kv_trace records; the page passes the translated words in `labels`.
"""
from __future__ import annotations

import plotly.graph_objects as go

from .labels import for_plotly

# category -> colour; the order is the legend's
COLOURS = {"reused": "#9ecae1", "appended": "#2ca02c", "copied": "#ff7f0e"}
BEAM_COLOURS = ["#1f77b4", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    """Title at the top, the legend in its own row between the title and the plot: a legend below a
    short plot (one beam) would sit on the axis' tick labels, since Plotly places it in plot fractions."""
    fig.update_layout(title=dict(text=title, y=1.0, yref="container", yanchor="top", pad=dict(t=12)),
                      height=height + 30, margin=dict(l=10, r=10, t=80, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0), barmode="stack")
    return fig


def cache_rows(cache_step, labels: dict) -> go.Figure:
    """One horizontal stacked bar per beam slot: rows reused, appended, copied after this step.
    Slots and parents are numbered from 1, as everywhere people read them (the records stay 0-based)."""
    slots = [f"{labels['beam']} {b.slot + 1}" for b in cache_step.beams]
    fig = go.Figure()
    for category in ("reused", "appended", "copied"):
        values = [getattr(b, category) for b in cache_step.beams]
        parents = [b.parent + 1 for b in cache_step.beams]
        fig.add_trace(go.Bar(
            y=slots, x=values, name=labels[category], orientation="h", marker_color=COLOURS[category],
            text=[str(v) if v else "" for v in values], textposition="inside", customdata=parents,
            hovertemplate="%{y}<br>" + labels[category] + " %{x}<br>" + labels["parent"]
                          + " %{customdata}<extra></extra>"))
    fig.update_xaxes(title=labels["rows"])
    fig.update_yaxes(autorange="reversed", type="category")
    return _layout(fig, labels["title"], height=140 + 45 * len(slots))


def paged_blocks(cache_step, token_texts: list, labels: dict) -> go.Figure:
    """Each physical block once (a square, its reference count inside); one line per beam through its blocks
    (beams numbered from 1)."""
    blocks = cache_step.paged_blocks
    # lay blocks out by position in the sequence (x) and, within a position, one under the other (y)
    row_at: dict = {}
    place = []
    for b in blocks:
        y = row_at.get(b.index, 0)
        row_at[b.index] = y + 1
        place.append((b.index, -y))
    fig = go.Figure()
    for beam, table in enumerate(cache_step.paged_tables):
        xs = [place[i][0] for i in table]
        ys = [place[i][1] for i in table]
        offset = (beam - (len(cache_step.paged_tables) - 1) / 2) * 0.04
        fig.add_trace(go.Scatter(x=xs, y=[y + offset for y in ys], mode="lines", name=f"{labels['beam']} {beam + 1}",
                                 line=dict(color=BEAM_COLOURS[beam % len(BEAM_COLOURS)], width=2),
                                 hoverinfo="skip"))
    texts = []
    for b in blocks:
        words = "".join(token_texts[t] for t in b.tokens)
        preview = words if len(words) <= 40 else words[:37] + "…"
        texts.append(for_plotly(preview))
    fig.add_trace(go.Scatter(
        x=[p[0] for p in place], y=[p[1] for p in place], mode="markers+text", name=labels["block"],
        text=[f"×{b.refs}" for b in blocks], textfont=dict(size=13, color=[   # dark text on the palest squares
            "#08306b" if b.refs == 1 and not b.full else "white" for b in blocks]),
        marker=dict(symbol="square", size=34,
                    color=["#08519c" if b.refs > 1 else ("#6baed6" if b.full else "#c6dbef") for b in blocks]),
        customdata=[[b.refs, ", ".join(str(x + 1) for x in b.beams), len(b.tokens), t] for b, t in zip(blocks, texts)],
        hovertemplate=labels["refs"] + " %{customdata[0]}<br>" + labels["beams"] + " %{customdata[1]}<br>"
                      + labels["tokens"] + " %{customdata[2]}<br>%{customdata[3]}<extra></extra>"))
    depth = max(row_at.values(), default=1)
    fig.update_xaxes(title=labels["position"], dtick=1, range=[-0.6, max(row_at, default=0) + 0.6])
    fig.update_yaxes(visible=False, range=[-depth + 0.4, 0.6])
    return _layout(fig, labels["title"], height=160 + 60 * depth)


def bytes_lines(series: dict, labels: dict) -> go.Figure:
    """series: name -> (steps, bytes). Bytes over steps, in MB (10^6)."""
    fig = go.Figure()
    dashes = ["solid", "dash", "dot", "dashdot"]
    for k, (name, (steps, values)) in enumerate(series.items()):
        fig.add_trace(go.Scatter(x=list(steps), y=[v / 1e6 for v in values], mode="lines+markers", name=name,
                                 line=dict(dash=dashes[k % len(dashes)]), customdata=list(values),
                                 hovertemplate=labels["step"] + " %{x}<br>%{customdata:,} B<extra>" + name
                                               + "</extra>"))
    fig.update_xaxes(title=labels["step"])
    fig.update_yaxes(title="MB", rangemode="tozero")
    fig.update_layout(barmode=None)
    return _layout(fig, labels["title"], height=360)
