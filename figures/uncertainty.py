"""The uncertainty strip: the entropy and the varentropy of every step of a run, one column a step.

Entropy H = E[-log p] says how unsure the next token is; varentropy V = Var[-log p] says how unevenly that
unsureness is spread over the candidates. Both are of the model's own distribution at the step, in nats or,
divided by ln 2 (ln 2 squared for V), in bits.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

BITS = math.log(2)


def uncertainty_strip(steps, cursor: int, labels: dict, unit: str = "nats", unit_word: str | None = None) -> go.Figure:
    """Two rows of bars over the steps (numbered from 1): H above, V below; the step on screen darker."""
    scale = BITS if unit == "bits" else 1.0
    xs = [s.index + 1 for s in steps]
    h = [s.entropy / scale for s in steps]
    v = [(s.varentropy / scale ** 2) if not math.isnan(s.varentropy) else None for s in steps]
    colour = ["#08519c" if s.index == cursor else "#6baed6" for s in steps]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12)
    fig.add_trace(go.Bar(x=xs, y=h, marker_color=colour, name=labels["entropy"],
                         hovertemplate=labels["step"] + " %{x}<br>H %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=xs, y=v, marker_color=["#a63603" if s.index == cursor else "#fdae6b" for s in steps],
                         name=labels["varentropy"],
                         hovertemplate=labels["step"] + " %{x}<br>V %{y:.3f}<extra></extra>"), row=2, col=1)
    word = unit_word or unit             # the unit's name in the reader's language
    fig.update_yaxes(title_text=f"H ({word})", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=f"V ({word}²)", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text=labels["step"], row=2, col=1, dtick=1 if len(xs) <= 30 else None)
    fig.update_layout(height=300, showlegend=False, margin=dict(l=10, r=10, t=40, b=10), bargap=0.15,
                      title=dict(text=labels["title"], y=1.0, yref="container", yanchor="top", pad=dict(t=10)))
    return fig
