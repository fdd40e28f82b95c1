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

# llama.cpp's and vLLM's "penalties" stage: its three settings, by word, config field and the value that is off
PENALTIES = (("repeat", "repetition_penalty", 1.0), ("frequency", "frequency_penalty", 0.0),
             ("presence", "presence_penalty", 0.0))
SETTING_WORDS = tuple(f"penalty_{word}" for word, _, _ in PENALTIES) + ("penalty_join",)
WORDS = {**english("pipeline", "stages_fig_", ("x", "y", "kept", "title", "chosen")),
         **english("pipeline", "stage_", ("raw", *STAGE_NAMES, *SETTING_WORDS))}
CHOSEN = "#e45756"
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d", "#bab0ac")
SHOWN = 8
MANY = 6           # stages from which the legend goes above the plot and each tick's setting on its own line


def stage_settings(stage, names: dict, config=None) -> list:
    """The setting(s) a stage's label shows: its value ('50'), settings that are whole numbers without decimals.
    llama.cpp's and vLLM's "penalties" stage records the repeat penalty alone; with the step's config it shows
    the settings that are on instead ('presence 0.5'), in the caller's words."""
    if stage.name == "penalties" and config is not None:
        on = [names.get(f"penalty_{word}", WORDS[f"penalty_{word}"]).format(value=f"{getattr(config, field):g}")
              for word, field, off in PENALTIES if getattr(config, field, off) != off]
        if on:
            return on
    return [f"{stage.value:g}"]


def stage_label(stage, names: dict, config=None) -> str:
    """'top-k 50', 'penalties: repeat 1.3, frequency 0.2' in the caller's words; config: the settings the step
    was shaped with (see stage_settings)."""
    value = names.get("penalty_join", WORDS["penalty_join"]).join(stage_settings(stage, names, config))
    if stage.name not in names:        # a name from a trace file is shown as it is, never used as a template
        return f"{for_plotly(stage.name)} {value}"
    return names[stage.name].format(value=value)


def tick_lines(stage, names: dict, config=None) -> list:
    """A stage's label on lines of its own: the name, then each setting ('top-k', '50'); a label whose
    setting is not at its end ('no-repeat 3-gram') is cut at its last space."""
    label, settings = stage_label(stage, names, config), stage_settings(stage, names, config)
    value = names.get("penalty_join", WORDS["penalty_join"]).join(settings)
    if label.endswith(value) and len(label) > len(value):
        return [label[:-len(value)].rstrip(), *settings]
    return label.rsplit(" ", 1)


def stages_figure(step, *, texts: dict | None = None, shown: int = SHOWN, config=None) -> go.Figure:
    """Lines across the stages for the `shown` most likely raw candidates of `step` (a Step with stages);
    config: the settings it was shaped with, for the labels (see stage_settings)."""
    words = dict(WORDS, **(texts or {}))
    labels = [words["raw"]] + [stage_label(s, words, config) for s in step.stages]
    many = len(step.stages) >= MANY
    # with many stages, a tick's setting goes on a line of its own: the ticks stay level and apart
    names = [tick_lines(s, words, config) if many else [label] for s, label in zip(step.stages, labels[1:])]
    ticks = [labels[0]] + ["<br>".join([*name, words["kept"].format(n=_count(s.kept_count, many))])
                           for name, s in zip(names, step.stages)]
    order = sorted(range(len(step.candidates)), key=lambda i: step.candidates[i].rank)
    chosen = step.chosen_ids[0] if step.chosen_ids else None
    picked = order[:shown]
    if chosen is not None:
        extra = [i for i in order if step.candidates[i].token_id == chosen and i not in picked]
        picked += extra
    fig = go.Figure()
    top = 0.0
    for n, i in enumerate(picked):
        cand = step.candidates[i]
        ys = [cand.prob] + [s.probs[i] if i < len(s.probs) else None for s in step.stages]
        is_chosen = cand.token_id == chosen
        top = max([top, *(y for y in ys if y is not None and math.isfinite(y))])
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
        yaxis=dict(title=dict(text=words["y"]), range=[0, axis_top(top)]),
        legend=dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top"), hovermode="closest")
    if many:     # the legend above the plot, which keeps the window's width for the stages
        fig.update_layout(height=500, margin=dict(l=60, r=20, t=120, b=110), xaxis_tickangle=0,
                          legend=dict(orientation="h", x=0, xanchor="left", y=1.02, yanchor="bottom"))
    return fig


def axis_top(top: float) -> float:
    """The probability axis's top: a tenth above the highest point drawn, so lines of a flat distribution (all
    under 0.05) spread over the plot instead of lying along its floor; never above 1.02 nor under 0.01."""
    return min(1.02, max(top * 1.1, 0.01))


def _count(n: int, short: bool) -> str:
    """A kept count for a tick: 49,152; with many stages, a vocabulary-sized count as 49k (the table has it whole)."""
    return f"{n / 1000:.0f}k" if short and n >= 10_000 else f"{n:,}"


def _logprob(p) -> str:
    """log p for the hover; a token a stage removed has log p = -inf."""
    return "−∞" if p is None or p <= 0 else f"{math.log(p):.3f}"
