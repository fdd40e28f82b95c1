"""Figures for agreement: probability beside expected utility (twin bars), and the utility matrix (a heatmap).

Twin bars, in the style of the MBR literature: each candidate on one row, its probability on the left and its
expected utility on the right, the bar at the lower bound the exact tree gives and a whisker up to the upper
bound, a diamond at the samples' estimate. The rows keep one order (most probable first), so a candidate whose
bars differ in length on the two sides is where the mode and MBR part. Rows are numbered positions with their
answers as tick labels: two candidates with one text (different tokens) stay two rows.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .labels import for_plotly

MARKS = {"mode": "★", "beam": "◆", "majority": "●", "mbr": "▲"}
MAX_ROWS = 30          # candidates drawn: the most probable, and every marked one
MAX_COLUMNS = 40       # evidence columns in the heatmap, most probable first
LABEL_CHARS = 24


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def marks_of(agreement, utility: str) -> dict:
    """candidate index -> the marks it carries: mode, beam (a beam or greedy landed on it), majority, MBR."""
    out: dict = {}
    r = agreement.results[utility]
    majority = agreement.majority.answer.token_ids if agreement.majority is not None else None
    for i, c in enumerate(agreement.candidates):
        got = []
        if i == agreement.mode:
            got.append("mode")
        if any(s == "greedy" or s.startswith("beam") for s in c.sources):
            got.append("beam")
        if c.token_ids == majority:
            got.append("majority")
        if i == r.winner:
            got.append("mbr")
        if got:
            out[i] = got
    return out


def rows_shown(agreement, marks: dict, most: int = MAX_ROWS) -> list:
    """The candidate indices drawn, most probable first: the first `most`, and every marked one after them."""
    n = len(agreement.candidates)
    return [i for i in range(n) if i < most or i in marks]


def _label(agreement, i: int, marks: dict, empty: str) -> str:
    text = agreement.candidates[i].text
    shown = for_plotly(_short(text)) if text else empty
    return "".join(MARKS[m] for m in marks.get(i, ())) + " " + shown


def twin_bars(agreement, utility: str, labels: dict) -> go.Figure:
    """labels: p, expected, estimate, lower, upper, empty, and the marks' names (mode, beam, majority, mbr) for
    the line above the bars (the page's heading names the figure: a title this long would not fit a phone)."""
    r = agreement.results[utility]
    marks = marks_of(agreement, utility)
    rows = rows_shown(agreement, marks)
    ys = list(range(len(rows)))
    ticks = [_label(agreement, i, marks, labels["empty"]) for i in rows]
    texts = [for_plotly(agreement.candidates[i].text) or labels["empty"] for i in rows]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=("p(h)", "E[u(h, Y)]"))
    probs = [agreement.candidates[i].prob for i in rows]
    fig.add_trace(go.Bar(x=probs, y=ys, orientation="h", name=labels["p"], marker_color="#6baed6",
                         hovertext=[f"{t}<br>p = {p:.4g}" for t, p in zip(texts, probs)], hoverinfo="text"),
                  row=1, col=1)
    low = [r.lower[i] for i in rows]
    high = [r.upper[i] for i in rows]
    fig.add_trace(go.Bar(x=low, y=ys, orientation="h", name=labels["expected"],
                         marker_color=["#31a354" if i == r.winner else "#a1d99b" for i in rows],
                         error_x=dict(type="data", symmetric=False, array=[h - lo for h, lo in zip(high, low)],
                                      arrayminus=[0] * len(rows), color="#555", thickness=1.5, width=4),
                         hovertext=[f"{t}<br>{labels['lower']} {lo:.4f} · {labels['upper']} {h:.4f}"
                                    for t, lo, h in zip(texts, low, high)], hoverinfo="text"),
                  row=1, col=2)
    if r.estimate is not None:
        fig.add_trace(go.Scatter(x=[r.estimate[i] for i in rows], y=ys, mode="markers", name=labels["estimate"],
                                 marker=dict(symbol="diamond", size=9, color="#e6550d"),
                                 hovertext=[f"{t}<br>{labels['estimate']} {r.estimate[i]:.4f}"
                                            for t, i in zip(texts, rows)], hoverinfo="text"),
                      row=1, col=2)
    fig.update_yaxes(tickmode="array", tickvals=ys, ticktext=ticks, autorange="reversed", row=1, col=1)
    fig.update_xaxes(rangemode="tozero", row=1, col=1)
    fig.update_xaxes(range=[0, 1.02], row=1, col=2)
    marks_line = " · ".join(f"{MARKS[m]} {labels[m]}" for m in MARKS)     # short: it must fit a phone's width
    fig.update_layout(height=max(280, 80 + 22 * len(rows)), bargap=0.25, margin=dict(l=10, r=10, t=70, b=10),
                      title=dict(text=marks_line, font=dict(size=13), y=1.0, yref="container", yanchor="top",
                                 pad=dict(t=10)),
                      legend=dict(orientation="h", yanchor="top", y=-0.04, xanchor="left", x=0), showlegend=True)
    return fig


def utility_heatmap(agreement, utility: str, labels: dict) -> go.Figure:
    """u(candidate, answer) for the candidates drawn (rows) and the most probable answers with exact p (columns).
    labels: row, column, u, empty."""
    r = agreement.results[utility]
    marks = marks_of(agreement, utility)
    rows = rows_shown(agreement, marks)
    columns = list(range(min(len(agreement.evidence.answers), MAX_COLUMNS)))
    answers = agreement.evidence.answers
    z = [[r.matrix[i][j] for j in columns] for i in rows]
    hover = [[f"h: {for_plotly(agreement.candidates[i].text) or labels['empty']}<br>"
              f"y: {for_plotly(answers[j].text) or labels['empty']} (p = {answers[j].prob:.3g})<br>"
              f"u = {r.matrix[i][j]:.3f}" for j in columns] for i in rows]
    fig = go.Figure(go.Heatmap(z=z, x=columns, y=list(range(len(rows))), zmin=0, zmax=1, colorscale="Greens",
                               hovertext=hover, hoverinfo="text", colorbar=dict(title=labels["u"], thickness=12)))
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(rows))), autorange="reversed",
                     ticktext=[_label(agreement, i, marks, labels["empty"]) for i in rows], title=labels["row"])
    fig.update_xaxes(tickmode="array", tickvals=columns, tickangle=-60, title=labels["column"],
                     ticktext=[for_plotly(_short(answers[j].text, 12)) if answers[j].text else labels["empty"]
                               for j in columns])
    fig.update_layout(height=max(300, 140 + 18 * len(rows)), margin=dict(l=10, r=10, t=50, b=10),
                      title=dict(text="u(h, y)", y=1.0, yref="container", yanchor="top", pad=dict(t=10)))
    return fig
