"""One step's distribution after each sampler stage, in the order transformers applies them.

One line per candidate (the top ones by raw rank): its probability in the raw
distribution, then after the repetition penalty, temperature, top-k, top-p and min-p,
each renormalised. A token a stage removes drops to 0 there; the chosen token is red.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from engine.config import STAGE_NAMES

from .labels import for_plotly
from .words import english

WORDS = {**english("pipeline", "stages_fig_", ("x", "y", "kept", "title", "chosen")),
         **english("pipeline", "stage_", ("raw", *STAGE_NAMES))}
CHOSEN = "#e45756"
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d", "#bab0ac")
SHOWN = 8
MANY = 6           # stages from which the legend goes above the plot and each tick's setting on its own line


def stage_label(stage, names: dict) -> str:
    """'top-k 50' in the caller's words; settings that are whole numbers print without decimals."""
    if stage.name not in names:        # a name from a trace file is shown as it is, never used as a template
        return f"{for_plotly(stage.name)} {stage.value:g}"
    return names[stage.name].format(value=f"{stage.value:g}")


def stages_figure(step, *, texts: dict | None = None, shown: int = SHOWN) -> go.Figure:
    """Lines across the stages for the `shown` most likely raw candidates of `step` (a Step with stages)."""
    words = dict(WORDS, **(texts or {}))
    labels = [words["raw"]] + [stage_label(s, words) for s in step.stages]
    many = len(step.stages) >= MANY
    # with many stages, a tick's setting goes on a line of its own: the ticks stay level and apart
    names = [label.rsplit(" ", 1) if many else [label] for label in labels[1:]]
    ticks = [labels[0]] + ["<br>".join([*name, words["kept"].format(n=_count(s.kept_count, many))])
                           for name, s in zip(names, step.stages)]
    order = sorted(range(len(step.candidates)), key=lambda i: step.candidates[i].rank)
    chosen = step.chosen_ids[0] if step.chosen_ids else None
    picked = order[:shown]
    if chosen is not None:
        extra = [i for i in order if step.candidates[i].token_id == chosen and i not in picked]
        picked += extra
    fig = go.Figure()
    for n, i in enumerate(picked):
        cand = step.candidates[i]
        ys = [cand.prob] + [s.probs[i] if i < len(s.probs) else None for s in step.stages]
        is_chosen = cand.token_id == chosen
        name = f"{cand.rank}. {for_plotly(cand.text)}" + (f" ({words['chosen']})" if is_chosen else "")
        fig.add_scatter(x=list(range(len(labels))), y=ys, mode="lines+markers", name=name,
                        line=dict(color=CHOSEN if is_chosen else PALETTE[n % len(PALETTE)],
                                  width=4 if is_chosen else 2),
                        marker=dict(size=9 if is_chosen else 6),
                        customdata=[_logprob(y) for y in ys],
                        hovertemplate=f"<b>{for_plotly(cand.text)}</b><br>p = %{{y:.4f}}<br>log p = %{{customdata}}"
                                      "<extra></extra>")
    fig.update_layout(
        title=dict(text=words["title"].format(step=step.index + 1), y=0.97, yref="container", yanchor="top"),
        height=430, margin=dict(l=60, r=20, t=80, b=80),
        xaxis=dict(title=dict(text=words["x"]), tickmode="array", tickvals=list(range(len(labels))), ticktext=ticks),
        yaxis=dict(title=dict(text=words["y"]), range=[0, 1.02]),
        legend=dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top"), hovermode="closest")
    if many:     # the legend above the plot, which keeps the window's width for the stages
        fig.update_layout(height=500, margin=dict(l=60, r=20, t=120, b=110), xaxis_tickangle=0,
                          legend=dict(orientation="h", x=0, xanchor="left", y=1.02, yanchor="bottom"))
    return fig


def _count(n: int, short: bool) -> str:
    """A kept count for a tick: 49,152; with many stages, a vocabulary-sized count as 49k (the table has it whole)."""
    return f"{n / 1000:.0f}k" if short and n >= 10_000 else f"{n:,}"


def _logprob(p) -> str:
    """log p for the hover; a token a stage removed has log p = -inf."""
    return "−∞" if p is None or p <= 0 else f"{math.log(p):.3f}"
