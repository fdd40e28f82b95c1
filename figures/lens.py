"""The logit lens as a heatmap: layers (rows) x steps (columns).

Each cell is the probability the layer already gives the token the run chose at that
step (read through the final norm and the unembedding); its text is the layer's own
top token. A ring marks, per step, the first layer where the chosen token is on top.
"""
from __future__ import annotations

import plotly.graph_objects as go

from .labels import for_plotly
from .words import english

WORDS = english("pipeline", "lens_fig_", ("x", "y", "emb", "z", "title", "first", "hover"))
FIRST = "#e45756"
TEXT_COLUMNS = 24      # beyond this many steps the cells are too narrow for their token text


def lens_figure(lens, *, current: int | None = None, texts: dict | None = None) -> go.Figure:
    """`lens`: an engine.inside.lens.Lens; `current`: the step to outline (the page's cursor)."""
    words = dict(WORDS, **(texts or {}))
    rows = [words["emb"]] + [str(i) for i in range(1, lens.layers)]
    columns = [f"{s + 1}: {for_plotly(t)}" for s, t in zip(lens.steps, lens.chosen_texts)]
    z = [[cell.chosen_prob for cell in row] for row in lens.cells]
    show_text = len(columns) <= TEXT_COLUMNS
    cell_text = [[for_plotly(cell.top_texts[0]) if show_text else "" for cell in row] for row in lens.cells]
    hover = [[words["hover"].format(
        layer=rows[layer], step=lens.steps[c] + 1,
        top=", ".join(f"{for_plotly(t)} {p:.3f}" for t, p in zip(cell.top_texts[:3], cell.top_probs[:3])),
        chosen=for_plotly(lens.chosen_texts[c]), p=f"{cell.chosen_prob:.3f}", rank=cell.chosen_rank)
        for c, cell in enumerate(row)] for layer, row in enumerate(lens.cells)]
    fig = go.Figure(go.Heatmap(z=z, x=columns, y=rows, text=cell_text, texttemplate="%{text}", hovertext=hover,
                               hoverinfo="text", colorscale="Blues", zmin=0, zmax=1, textfont=dict(size=10),
                               colorbar=dict(title=dict(text=words["z"]))))
    firsts = [(columns[c], rows[layer]) for c in range(len(columns))
              if (layer := lens.first_top_layer(c)) is not None]
    if firsts:
        fig.add_scatter(x=[x for x, _ in firsts], y=[y for _, y in firsts], mode="markers", name=words["first"],
                        marker=dict(symbol="circle-open", size=18, color=FIRST, line=dict(width=3)), hoverinfo="name")
    if current is not None and current in lens.steps:
        col = lens.steps.index(current)
        fig.add_vrect(x0=col - 0.5, x1=col + 0.5, line=dict(color=FIRST, width=2, dash="dot"))
    fig.update_layout(
        title=dict(text=words["title"], y=0.97, yref="container", yanchor="top"),
        height=max(360, 22 * len(rows) + 160), margin=dict(l=90, r=20, t=70, b=110),
        xaxis=dict(title=dict(text=words["x"]), tickangle=-45, type="category"),
        yaxis=dict(title=dict(text=words["y"]), type="category"),
        legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0, xanchor="left"))
    return fig
