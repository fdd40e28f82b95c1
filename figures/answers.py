"""Figures for Whole answers: the tree drawn so that height is probability, and entropy against varentropy.

The tree is an icicle drawn with bars (the app's Plotly bundle holds the 2-D types only): column d holds the
prefixes of d tokens, each a bar whose height is its path probability, stacked inside its parent's bar.
Under an expanded prefix, in order: its end (a complete answer, green), its kept children (an open prefix, one the
budget did not expand, purple: the ledger's "prefixes" with the orange), the mass of the children it did not keep
(grey), and at the depth the mass of longer answers (orange). Branches smaller than `min_mass` are drawn as one
pale bar per parent, less the open prefixes and the cut inside them, drawn as one purple and one orange bar: the
heights still add up to the parent's, and the bars of each part of the ledger add up to its number.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from .labels import for_plotly

COLOURS = {"prefix": "#6baed6", "open": "#9e7ac8", "answer": "#31a354", "left_out": "#9e9e9e",
           "cut": "#fdae6b", "small": "#e6e6e6"}
KINDS = ("answer", "prefix", "open", "left_out", "cut", "small")


PATH_CHARS = 200      # of a prefix's text in a hover: its end, where the branches differ


def path_text(tree, node_id: int, limit: int = PATH_CHARS) -> str:
    """The text of a prefix, its last `limit` characters (a tree read from a file may hold long token texts:
    each bar's text is built on its own, bounded, never by copying its parent's)."""
    parts, size = [], 0
    while node_id > 0 and size < limit:
        node = tree.nodes[node_id]
        parts.append(node.text)
        size += len(node.text)
        node_id = node.parent
    text = "".join(reversed(parts))
    return text if len(text) <= limit and node_id <= 0 else "…" + text[-limit:]


def _children(tree) -> dict:
    out: dict = {}
    for node in tree.nodes[1:]:
        out.setdefault(node.parent, []).append(node)
    return out


def tree_bars(tree, min_mass: float = 0.002) -> dict:
    """kind -> list of (column, base, height, node id or -1, path text): every bar of the icicle."""
    bars = {k: [] for k in KINDS}
    children = _children(tree)
    # the open prefixes' and the cut's mass inside each subtree: a small branch drawn as one pale bar still
    # shows them in their colours, so the bars of each part of the ledger add up to its number
    open_below, cut_below = {}, {}
    for node in reversed(tree.nodes):
        kids = children.get(node.id, [])
        open_below[node.id] = (0.0 if node.expanded else node.mass) + sum(open_below[c.id] for c in kids)
        cut_below[node.id] = node.cut + sum(cut_below[c.id] for c in kids)

    def place(node, base: float, mass: float) -> None:
        column = node.depth + 1
        y = base
        if node.end_prob > 0:
            bars["answer"].append((column, y, mass * node.end_prob, node.id, path_text(tree, node.id)))
            y += mass * node.end_prob
        small, small_open, small_cut = 0.0, 0.0, 0.0
        for child in sorted(children.get(node.id, []), key=lambda c: -c.logprob):
            m = child.mass
            if m < min_mass:
                small_open += open_below[child.id]
                small_cut += cut_below[child.id]
                small += max(m - open_below[child.id] - cut_below[child.id], 0.0)
                continue
            if child.expanded:
                bars["prefix"].append((column, y, m, child.id, path_text(tree, child.id)))
                place(child, y, m)
            else:
                bars["open"].append((column, y, m, child.id, path_text(tree, child.id)))
            y += m
        if small_open > 0:
            bars["open"].append((column, y, small_open, -1, path_text(tree, node.id)))
            y += small_open
        for kind, value in (("small", small), ("left_out", node.left_out), ("cut", node.cut + small_cut)):
            if value > 0:
                bars[kind].append((column, y, value, node.id, path_text(tree, node.id)))
                y += value

    if tree.nodes[0].expanded:
        place(tree.nodes[0], 0.0, 1.0)
    return bars


def icicle(tree, labels: dict, min_mass: float = 0.002, forks: dict | None = None) -> go.Figure:
    """The tree, one column per token; labels: the translated words (kinds, axis titles, hover words, `groups`
    with {n}); forks: node id -> how many answer groups lie below it (engine.answers.meaning.forks)."""
    forks = forks or {}
    fig = go.Figure()
    nodes = tree.nodes
    for kind, bars in tree_bars(tree, min_mass).items():
        if not bars:
            continue
        text, hover = [], []
        for _, _, height, node_id, path in bars:
            node = nodes[node_id] if node_id >= 0 else None
            show = node is not None and kind in ("prefix", "open") and height >= 0.025
            text.append(for_plotly(node.text) if show else "")
            extra = ""
            if node is not None and kind == "prefix" and math.isfinite(node.entropy):
                extra = f"<br>H {node.entropy:.2f} · V {node.varentropy:.2f} {labels['nats']}"
                if node.id in forks:
                    extra += "<br>" + labels["groups"].format(n=forks[node.id])
            hover.append(f"{for_plotly(path) if path else '∅'}<br>{labels[kind]}: {height:.4g}{extra}")
        fig.add_trace(go.Bar(
            x=[b[0] for b in bars], y=[b[2] for b in bars], base=[b[1] for b in bars], width=0.96,
            name=labels[kind], marker=dict(color=COLOURS[kind], line=dict(color="white", width=0.5)),
            text=text, textposition="inside", insidetextanchor="middle", textangle=0, textfont=dict(size=12),
            hovertext=hover, hoverinfo="text", cliponaxis=False))
    depth = tree.settings.depth
    fig.update_xaxes(title=labels["column"], tickmode="linear", dtick=1, range=[0.5, depth + 1.5])
    fig.update_yaxes(title=labels["mass"], range=[1, 0], tickformat=".0%")
    fig.update_layout(barmode="overlay", height=560, bargap=0, margin=dict(l=10, r=10, t=70, b=10),
                      title=dict(text=labels["title"], y=1.0, yref="container", yanchor="top", pad=dict(t=12)),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
                      uniformtext=dict(minsize=9, mode="hide"))
    return fig


def uncertainty_map(tree, labels: dict) -> go.Figure:
    """Each expanded prefix at (entropy, varentropy) of its next token, its marker's area its path mass."""
    points = [n for n in tree.nodes if n.expanded and math.isfinite(n.entropy)]
    fig = go.Figure(go.Scatter(
        x=[n.entropy for n in points], y=[n.varentropy for n in points], mode="markers",
        marker=dict(size=[6 + 30 * math.sqrt(n.mass) for n in points], color="#6baed6",
                    line=dict(color="#08519c", width=1), opacity=0.8),
        hovertext=[f"{for_plotly(path_text(tree, n.id)) or '∅'}<br>H {n.entropy:.2f} · V {n.varentropy:.2f}"
                   for n in points],
        hoverinfo="text"))
    fig.update_xaxes(title=labels["entropy"], rangemode="tozero")
    fig.update_yaxes(title=labels["varentropy"], rangemode="tozero")
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=50, b=10), showlegend=False,
                      title=dict(text=labels["map_title"], y=1.0, yref="container", yanchor="top", pad=dict(t=12)))
    return fig
