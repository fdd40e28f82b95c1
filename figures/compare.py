"""Strategies side by side: each lane's cumulative logprob per step, and where it parts from greedy."""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go

from .labels import for_plotly
from .words import english

WORDS = english("compare", "fig_", ("title", "x", "y", "parts"))
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d")


def token_logprobs(trace) -> list:
    """(step index, token text, logprob) of the trace's first sequence (the best beam for beam search)."""
    if trace.nodes and trace.best.node_id is not None:
        return [(node.step, node.text, node.logprob) for node in trace.path(trace.best.node_id)]
    out = []
    for step in trace.steps:
        cand = step.chosen
        out.append((step.index, step.chosen_texts[0], cand.logprob if cand else float("nan")))
    return out


def token_ids(trace) -> list:
    """Generated token ids of the trace's first sequence."""
    if trace.nodes and trace.best.node_id is not None:
        return list(trace.best.token_ids)
    return [s.chosen_ids[0] for s in trace.steps]




def coinciding(lanes: list) -> list:
    """Groups of lane names whose texts are the same tokens, in lane order: one line hides the other."""
    groups: dict = {}
    for name, trace in lanes:
        groups.setdefault(tuple(token_ids(trace)), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")


def lane_style(i: int, count: int) -> dict:
    """Line and marker of lane i of count: earlier lanes wider and solid-ish, later ones thinner and dashed,
    so a lane drawn on top of another leaves the one below visible around it."""
    below = count - 1 - i
    return dict(line=dict(color=PALETTE[i % len(PALETTE)], width=2 + 2.5 * below, dash=DASHES[i % len(DASHES)]),
                marker=dict(size=5 + 2 * below, symbol=SYMBOLS[i % len(SYMBOLS)]))


def _parts_legend(fig: go.Figure, name: str) -> None:
    """One legend entry for the ✕ markers, in grey (each ✕ wears its lane's colour): a reader learns what the
    marks mean, and a click on the entry hides them all (they share its legend group)."""
    fig.add_scatter(x=[None], y=[None], mode="markers", name=html.escape(name), legendgroup="parts",
                    marker=dict(symbol="x", size=12, color="#888", line=dict(width=2, color="#888")),
                    hoverinfo="skip")


def lanes_figure(lanes: list, part_steps: dict | None = None, highlight_step: int | None = None,
                 texts: dict | None = None) -> go.Figure:
    """lanes: [(name, trace)]; part_steps: name -> step where the lane parts from greedy (marked ✕)."""
    words = dict(WORDS, **(texts or {}))
    part_steps = part_steps or {}
    fig = go.Figure()
    for i, (name, trace) in enumerate(lanes):
        colour = PALETTE[i % len(PALETTE)]
        points = token_logprobs(trace)
        xs, ys, hover, total = [], [], [], 0.0
        for step, text, logprob in points:
            total += logprob if logprob is not None and math.isfinite(logprob) else 0.0
            xs.append(step + 1)
            ys.append(total)
            hover.append(f"{html.escape(name)} · {words['x']} {step + 1}<br><b>{for_plotly(text)}</b>"
                         f"<br>logprob {logprob:.3f}<br>{words['y']} {total:.3f}")
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=html.escape(name), hovertext=hover, hoverinfo="text",
                        **lane_style(i, len(lanes)))
        part = part_steps.get(name)
        if part is not None and part < len(ys):
            fig.add_scatter(x=[xs[part]], y=[ys[part]], mode="markers", showlegend=False, legendgroup="parts",
                            marker=dict(symbol="x", size=14, color=colour, line=dict(width=2, color=colour)),
                            hovertext=[f"{html.escape(name)}: {words['parts']} ({words['x']} {part + 1})"],
                            hoverinfo="text")
    if any(trace.legendgroup == "parts" for trace in fig.data):
        _parts_legend(fig, words["parts"])
    if highlight_step is not None:
        fig.add_vline(x=highlight_step + 1, line=dict(color="rgba(128,128,128,0.6)", dash="dot"))
    fig.update_layout(title=dict(text=words["title"], y=0.97, yref="container", yanchor="top"), height=380,
                      margin=dict(l=60, r=30, t=95, b=50),
                      xaxis=dict(title=dict(text=words["x"]), dtick=1 if max((len(t.steps) for _, t in lanes),
                                                                             default=0) <= 30 else 5),
                      yaxis=dict(title=dict(text=words["y"])), hovermode="closest",
                      legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0, xanchor="left"))
    return fig
