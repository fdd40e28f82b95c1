"""Figures for "Same prompt, another answer": the runs as a strip of steps (identical, bits differ, the token
differs, another text after it), and under it every run's largest logit change and the alone run's top-2 margin
on one log axis, the fragile steps shaded (margin <= 2 max |Δ|: only there could a token flip).

Pure functions of an engine.reproduce Study; the page passes the translated words in `labels` and the runs' names.
A change of exactly 0 has no place on a log axis: it is left out of the lines, and the strip says "identical".
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots
import html

from .labels import for_plotly

STATE_COLOURS = {"same": "#b7dfb0", "bits": "#f0a830", "token": "#d62728", "after": "#f3c2c2"}
STATES = tuple(STATE_COLOURS)
FRAGILE_FILL = "rgba(214, 39, 40, 0.13)"
MARGIN_COLOUR = "#222222"
RUN_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#ff7f0e", "#2ca02c")


def cell_states(comparison) -> list:
    """Each step of a run as one of STATES: the same bits as the alone run, other bits for the same token, the
    first other token, or a step after the texts parted."""
    first = comparison.first_divergence
    states = []
    for t, check in enumerate(comparison.steps):
        if first is not None and t > first:
            states.append("after")
        elif first is not None and t == first:
            states.append("token")
        else:
            states.append("same" if not check.max_abs_delta else "bits")
    return states


def fragile_steps(study) -> list:
    """Steps (0-based) where some run's margin was at most twice its change."""
    return sorted({t for c in study.comparisons for t in c.fragile_steps})


def _number(value) -> str:
    return "-" if value is None else "0" if value == 0 else f"{value:.3g}"


def study_figure(study, names: list, token_texts: list, labels: dict) -> go.Figure:
    """The strip (one row per run, the alone run on top) over the log chart of max |Δ| per run and the alone run's
    margin; fragile steps shaded on both, the closest call marked."""
    runs = len(study.runs)
    steps = max(len(r.token_ids) for r in study.runs)
    strip_px, chart_px = 30 * runs + 20, 300
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=90 / (strip_px + chart_px + 90),
                        row_heights=[strip_px, chart_px])
    _strip(fig, study, names, token_texts, labels, steps)
    _chart(fig, study, names, labels)
    for t in fragile_steps(study):
        for row in (1, 2):
            fig.add_vrect(x0=t + 0.5, x1=t + 1.5, fillcolor=FRAGILE_FILL, line_width=0, layer="below", row=row, col=1)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=labels["fragile"], hoverinfo="skip",
                             marker=dict(symbol="square", size=12, color=FRAGILE_FILL)), row=2, col=1)
    closest = study.closest
    if closest is not None:
        fig.add_vline(x=closest.step + 1, line=dict(color=MARGIN_COLOUR, width=1.5, dash="dot"), row=2, col=1)
        fig.add_annotation(x=closest.step + 1, y=1, yref="y2 domain", text=labels["closest"], showarrow=False,
                           yanchor="bottom", font=dict(size=12), bgcolor="rgba(255,255,255,0.8)")
    fig.update_xaxes(row=2, col=1, range=[0.5, steps + 0.5], dtick=1 if steps <= 32 else None)
    fig.update_layout(title=labels["title"], height=strip_px + chart_px + 90 + 150, margin=dict(l=10, r=10, t=60, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.12, xanchor="left", x=0),
                      hovermode="closest")
    return fig


def _strip(fig, study, names, token_texts, labels, steps) -> None:
    codes = {state: i for i, state in enumerate(STATES)}
    z, text, hover = [], [], []
    for run, comparison in zip(study.runs, study.comparisons):
        states = cell_states(comparison)
        z.append([codes[s] for s in states] + [None] * (steps - len(states)))
        text.append(["!" if c.fragile else "" for c in comparison.steps] + [""] * (steps - len(states)))
        row = []
        for t, (check, state) in enumerate(zip(comparison.steps, states)):
            token = token_texts[run.token_ids[t]] if 0 <= run.token_ids[t] < len(token_texts) else "?"
            row.append(labels["cell"].format(step=t + 1, token=for_plotly(token), state=labels[state],
                                             delta=_number(check.max_abs_delta), margin=_number(check.margin)))
        hover.append(row + [""] * (steps - len(row)))
    scale = []
    n = len(STATES)
    for i, state in enumerate(STATES):
        scale += [[i / n, STATE_COLOURS[state]], [(i + 1) / n, STATE_COLOURS[state]]]
    shown = [html.escape(name, quote=False) for name in names]        # a name is ours: its spaces stay spaces
    fig.add_trace(go.Heatmap(z=z, x=list(range(1, steps + 1)), y=shown, text=text, texttemplate="%{text}",
                             textfont=dict(size=13, color="black"), customdata=hover,
                             hovertemplate="%{y}<br>%{customdata}<extra></extra>", colorscale=scale, zmin=-0.5,
                             zmax=n - 0.5, showscale=False, xgap=2, ygap=2), row=1, col=1)
    for state in STATES:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=labels[state], hoverinfo="skip",
                                 marker=dict(symbol="square", size=12, color=STATE_COLOURS[state])), row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1, type="category")


def _chart(fig, study, names, labels) -> None:
    reference = study.comparisons[0]
    values = [c.max_abs_delta for comp in study.comparisons[1:] for c in comp.steps if c.max_abs_delta]
    values += [c.margin for c in reference.steps if c.margin > 0]
    floor = min(values) / 10 if values else 1e-8
    for r, comparison in enumerate(study.comparisons[1:], start=1):
        xs = [t + 1 for t, c in enumerate(comparison.steps) if c.max_abs_delta]
        ys = [c.max_abs_delta for c in comparison.steps if c.max_abs_delta]
        if not xs:
            continue
        colour = RUN_COLOURS[(r - 1) % len(RUN_COLOURS)]
        name = html.escape(names[r], quote=False)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=labels["delta"].replace("{run}", name),
                                 line=dict(color=colour, width=1.5), marker=dict(size=6, color=colour),
                                 hovertemplate=labels["delta_hover"].replace("{run}", name) + "<extra></extra>"),
                      row=2, col=1)
    margins = [(t + 1, c.margin) for t, c in enumerate(reference.steps)]
    positive = [(x, m) for x, m in margins if m > 0]
    if positive:
        fig.add_trace(go.Scatter(x=[x for x, _ in positive], y=[m for _, m in positive], mode="lines+markers",
                                 name=labels["margin"], line=dict(color=MARGIN_COLOUR, width=2.5),
                                 marker=dict(size=7, color=MARGIN_COLOUR),
                                 hovertemplate=labels["margin_hover"] + "<extra></extra>"), row=2, col=1)
    ties = [x for x, m in margins if m == 0]
    if ties:
        fig.add_trace(go.Scatter(x=ties, y=[floor] * len(ties), mode="markers", name=labels["tie"],
                                 marker=dict(symbol="x", size=11, color=MARGIN_COLOUR),
                                 hovertemplate=labels["tie_hover"] + "<extra></extra>"), row=2, col=1)
    if not any(c.max_abs_delta for comp in study.comparisons[1:] for c in comp.steps):
        fig.add_annotation(x=0.5, y=0.05, xref="x2 domain", yref="y2 domain", text=labels["all_zero"],
                           showarrow=False, font=dict(size=13), bgcolor="rgba(255,255,255,0.85)")
    fig.update_yaxes(type="log", title_text=labels["value"], row=2, col=1, exponentformat="power")


def served_histogram(levels: list, labels: dict) -> go.Figure:
    """Distinct completions of a served study: one bar per distinct completion (numbered by how often it came
    back over every level, #1 the most common), one colour per concurrency level, the count at that level."""
    totals: dict = {}
    texts: dict = {}
    for level in levels:
        for c in level.completions:
            totals[c.tokens] = totals.get(c.tokens, 0) + 1
            texts.setdefault(c.tokens, c.text)
    order = sorted(totals, key=lambda tokens: -totals[tokens])
    names = [f"#{i + 1}" for i in range(len(order))]
    fig = go.Figure()
    for k, level in enumerate(levels):
        counts = {}
        for c in level.completions:
            counts[c.tokens] = counts.get(c.tokens, 0) + 1
        fig.add_trace(go.Bar(x=names, y=[counts.get(tokens, 0) for tokens in order],
                             name=labels["level"].replace("{n}", str(level.concurrency)),
                             marker_color=RUN_COLOURS[k % len(RUN_COLOURS)],
                             customdata=[for_plotly(texts[tokens][:200]) for tokens in order],
                             hovertemplate="%{x}: %{y}<br>%{customdata}<extra>%{fullData.name}</extra>"))
    fig.update_layout(title=labels["title"], barmode="group", height=340, margin=dict(l=10, r=10, t=60, b=10),
                      xaxis_title=labels["x"], yaxis_title=labels["y"], legend=dict(orientation="h", y=-0.25))
    return fig
