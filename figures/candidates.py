"""The candidates of one step: raw vs shaped probability, what truncation cut, the chosen token.

Bars are ordered by raw rank. Two bars per token: what the model said (raw) and what
the strategy made of it (after temperature / top-k / top-p / min-p / penalty). Tokens
the truncation cut are grey; the chosen token is outlined. A line on the right axis
is the cumulative raw probability, with the top-p threshold drawn across it.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from engine.config import WARPED_STRATEGIES

from .labels import for_plotly, wrapped
from .words import english

RAW = "#4c78a8"        # blue: readable on white and on Streamlit's dark background
SHAPED = "#f58518"     # orange
CUT = "rgba(150,150,150,0.45)"
CHOSEN = "#e45756"     # red outline
CUMULATIVE = "#54a24b"  # green line
THRESHOLD = "#b279a2"
NOTE_COLUMNS = 30      # the top-p line's label, in lines a phone's plot holds (a Chinese character is 2)
OTHER = "rgba(120,120,120,0.55)"   # the share a served model's top-N leaves out
MARK = '<span style="color:{colour}">▼</span>'   # a coloured marker before a label in the text colour


WORDS = {**english("step", "fig_", ("raw", "shaped", "cut", "cumulative", "threshold", "after_temperature", "chosen",
                                     "x", "y", "y2", "title", "title_chosen")),
         **english("served", "fig_", ("other", "other_hover"))}


def candidates_figure(step, config=None, *, title: str | None = None, texts: dict | None = None,
                      other: float | None = None) -> go.Figure:
    """Bar chart of `step.candidates` (a Step record). `config` (DecodeConfig) adds the top-p line.

    texts: optional translated labels: raw, shaped, cut, cumulative, threshold, after_temperature, chosen, x, y,
    y2, title, other, other_hover.
    other: the probability the listed candidates leave out (a served model's top-N view): one more
    bar, after the listed ones, that names no token; the cumulative line then ends at 1.

    The traces and the layout are put together as Plotly's dictionaries and checked once, by the Figure
    they make: adding them one by one (add_bar, update_layout) checks every property on every call, and
    took longer than the forward pass of the step it draws.
    """
    words = dict(WORDS, **(texts or {}))
    cands = sorted(step.candidates, key=lambda c: c.rank)
    chosen_ids = set(step.chosen_ids[:1])
    hover = [f"<b>{for_plotly(c.text)}</b> (id {c.token_id})<br>rank {c.rank}<br>raw p = {c.prob:.4f}"
             f"<br>logprob = {_fmt(c.logprob)}<br>after strategy p = {c.shaped_prob:.4f}"
             f"<br>{'kept' if c.kept else words['cut']}" for c in cands]
    traces, notes = [], []
    x, ticks = _bars(traces, cands, chosen_ids, hover, other, words)
    if config is not None and config.strategy in WARPED_STRATEGIES and config.top_p < 1.0:
        _top_p_line(traces, notes, config, len(cands), words)
    for i, c in enumerate(cands):
        if c.token_id in chosen_ids:
            # the marker in the outline's red, the word in the text colour (red text is under 4.5:1 on white)
            notes.append(dict(x=i, y=max(c.prob, c.shaped_prob), showarrow=False, yshift=14, font=dict(size=13),
                              text=f"{MARK.format(colour=CHOSEN)} {words['chosen']}"))
    top, beyond = top_and_beyond(cands)
    entries = sum(1 for trace in traces if trace.get("showlegend") is not False)
    extra_top = 30 if entries > 3 else 0          # room for a second legend row under the title
    heading = title or (words["title_chosen"] if beyond else words["title"])
    layout = dict(
        annotations=notes,
        title=dict(text=heading.format(step=step.index + 1, n=top, rank=", ".join(str(r) for r in beyond)), y=0.97,
                   yref="container", yanchor="top"),
        barmode="group", bargap=0.25, height=460 + extra_top, margin=dict(l=60, r=60, t=95 + extra_top, b=110),
        xaxis=dict(title=dict(text=words["x"]), tickmode="array", tickvals=x, ticktext=ticks, tickangle=-45),
        yaxis=dict(title=dict(text=words["y"]), rangemode="tozero"),
        yaxis2=dict(title=dict(text=words["y2"]), overlaying="y", side="right", range=[0, 1.05], showgrid=False,
                    tickvals=[0, 0.25, 0.5, 0.75, 1.0]),
        legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0, xanchor="left"),
        hovermode="closest", clickmode="event+select",
    )
    return go.Figure(data=traces, layout=layout)


def _bars(traces: list, cands: list, chosen_ids: set, hover: list, other: float | None, words: dict) -> tuple:
    """Raw and shaped bars side by side (cut ones grey, the chosen outlined), the 'other' bar of a served
    top-N view, the click targets and the cumulative raw line, added to `traces`. Returns the x positions and
    their tick texts."""
    x = list(range(len(cands)))
    ticks = [f"{c.rank}. {for_plotly(c.text)}" for c in cands]
    outline = dict(color=CHOSEN, width=[3 if c.token_id in chosen_ids else 0 for c in cands])
    ids = [c.token_id for c in cands]
    traces.append(dict(type="bar", x=x, y=[c.prob for c in cands], name=words["raw"],
                       marker=dict(color=[RAW if c.kept else CUT for c in cands], line=outline), hovertext=hover,
                       hoverinfo="text", customdata=ids, offsetgroup="raw" if other is not None else None))
    traces.append(dict(type="bar", x=x, y=[c.shaped_prob for c in cands], name=words["shaped"],
                       marker=dict(color=[SHAPED if c.kept else CUT for c in cands], line=outline), hovertext=hover,
                       hoverinfo="text", customdata=ids, offsetgroup="shaped" if other is not None else None))
    # legend entry for the grey "cut" colour
    if any(not c.kept for c in cands):
        traces.append(dict(type="bar", x=[None], y=[None], name=words["cut"], marker=dict(color=CUT), showlegend=True,
                           hoverinfo="skip"))
    cumulative, total = [], 0.0
    for c in cands:
        total += c.prob
        cumulative.append(min(total, 1.0))
    line_x = list(x)
    if other is not None:
        at = len(cands)
        traces.append(dict(type="bar", x=[at], y=[other], name=words["other"],
                           marker=dict(color=OTHER, pattern=dict(shape="/", fgcolor="rgba(80,80,80,0.8)")),
                           hovertext=[words["other_hover"].format(p=f"{other:.4f}")], hoverinfo="text",
                           customdata=[None], offsetgroup="raw", showlegend=True))
        ticks = ticks + [words["other"]]
        x = x + [at]
        line_x.append(at)
        cumulative.append(min(total + other, 1.0))
    _click_targets(traces, x[:len(cands)], ids, hover)
    traces.append(dict(type="scatter", x=line_x, y=cumulative, name=words["cumulative"], yaxis="y2",
                       mode="lines+markers", line=dict(color=CUMULATIVE, width=2), marker=dict(size=5),
                       hoverinfo="y+name"))
    return x, ticks


def _top_p_line(traces: list, notes: list, config, n: int, words: dict) -> None:
    """The top-p threshold on the cumulative axis, named on the line itself, not in the legend: a fifth
    legend entry, or a long one, stacks the legend into rows that squeeze the plot. With a temperature,
    the label says the line is only a guide here."""
    threshold = words["threshold"].format(p=f"{config.top_p:g}")
    if config.temperature != 1.0:
        threshold += words["after_temperature"]
    traces.append(dict(type="scatter", x=[-0.5, n - 0.5], y=[config.top_p] * 2, yaxis="y2", mode="lines",
                       name=threshold, line=dict(color=THRESHOLD, dash="dash", width=2), hoverinfo="name",
                       showlegend=False))
    # the label under the line (the curve usually runs above it there), in the text colour: a purple line
    # is a graphic, purple text would be too faint to read. Anchored at the right, in lines short enough for
    # a phone's plot (the caveat on one line ran off a 390-pixel screen's left edge)
    notes.append(dict(x=n - 0.5, y=config.top_p, yref="y2", text="<br>".join(wrapped(threshold, NOTE_COLUMNS)),
                      showarrow=False, xanchor="right", yanchor="top", align="right", font=dict(size=13)))


def _click_targets(traces: list, x: list, token_ids: list, hover: list) -> None:
    """A clear bar the full height of the plot behind each candidate's column, carrying its token: a rank-3
    bar at p = 0.01 is a few pixels tall, too small to click, but its column is not. On the right-hand axis,
    whose bars are grouped apart, so the visible pairs keep their places; it carries the hover text too,
    since it lies over them."""
    traces.append(dict(type="bar", x=x, y=[1.05] * len(x), yaxis="y2", width=0.8,
                       marker=dict(color="rgba(0,0,0,0)", line=dict(width=0)), customdata=token_ids,
                       hovertext=hover, hoverinfo="text", showlegend=False, name=""))


def top_and_beyond(cands: list) -> tuple:
    """(k, ranks): the candidates are the top k by rank plus these lower-ranked ones (a chosen token
    from far down the list), so a title can say "top 20 + the chosen (rank 67)" rather than "top 21"."""
    ranks = sorted(c.rank for c in cands)
    k = 0
    while k < len(ranks) and ranks[k] == k + 1:
        k += 1
    return k, ranks[k:]


def _fmt(value: float) -> str:
    return "−∞" if value is None or (isinstance(value, float) and math.isinf(value)) else f"{value:.3f}"
