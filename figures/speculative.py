"""Figures for the speculative decoding page: the rounds as a strip, p against q at one position, the test
u <= p/q, acceptance per draft position, and the histograms of many draws against p.

Pure functions of engine.speculative records and plain numbers; the page passes the translated words in `labels`.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .labels import for_plotly

GREEN, RED, GREY, BLUE, GOLD, ORANGE = "#2ca02c", "#d62728", "#bdbdbd", "#1f77b4", "#e6a700", "#ff7f0e"
PURPLE = "#9467bd"
# "plain": a round with no draft (prompt lookup found nothing to copy): the target drew its token as plain decoding
STATUS_COLOURS = {"kept": GREEN, "rejected": RED, "unchecked": GREY, "corrected": BLUE, "bonus": GOLD,
                  "plain": PURPLE}
ROUND_FONT = 12          # px of the round numbers, as the boxes' own texts (presentation mode enlarges both)
PER_LINE = 14            # boxes per line of the strip before it wraps
SHOWN = 10               # candidates drawn at one position


def next_kind(rnd) -> str:
    """How the target's own token of a round reads: corrected, bonus, or plain when there was no draft to check
    (the record says bonus: every one of the none drafted was kept)."""
    return rnd.next_kind if rnd.drafts else "plain"


def strip_boxes(rounds: list) -> list:
    """(round index, draft index or None, status, text) of each box in reading order: each round's drafts,
    then the target's own token (corrected, bonus or plain)."""
    boxes = []
    for rnd in rounds:
        for j, draft in enumerate(rnd.drafts):
            boxes.append((rnd.index, j, draft.status, draft.text))
        if rnd.next_id is not None:
            boxes.append((rnd.index, None, next_kind(rnd), rnd.next_text))
    return boxes


def rounds_strip(rounds: list, labels: dict, selected: tuple | None = None) -> go.Figure:
    """Every box of every round, wrapped into lines of PER_LINE: green kept, red rejected, grey never checked,
    blue the corrected token, gold the bonus, purple a plain step (no draft); a gap and the round's number
    between rounds, and a round that fits on a line is never split over two. `selected` (round, draft index or
    None) is outlined."""
    boxes = strip_boxes(rounds)
    size = {}
    for rnd_index, _, _, _ in boxes:
        size[rnd_index] = size.get(rnd_index, 0) + 1
    xs, ys, slot, last_round, starts = [], [], 0, None, []
    for rnd_index, _, _, _ in boxes:
        if rnd_index != last_round:
            if last_round is not None:
                slot += 1                               # a gap between rounds
            left = PER_LINE - slot % PER_LINE
            if slot % PER_LINE and size[rnd_index] > left and size[rnd_index] <= PER_LINE:
                slot += left                            # the round starts the next line rather than wrap
            starts.append((slot, rnd_index))
        xs.append(slot % PER_LINE)
        ys.append(-(slot // PER_LINE))
        last_round = rnd_index
        slot += 1
    fig = go.Figure()
    for i, (rnd_index, draft_index, status, _) in enumerate(boxes):     # boxes in data units: they grow with the figure
        chosen = selected == (rnd_index, draft_index)
        fig.add_shape(type="rect", x0=xs[i] - 0.44, x1=xs[i] + 0.44, y0=ys[i] - 0.36, y1=ys[i] + 0.36,
                      fillcolor=STATUS_COLOURS[status], opacity=0.85, layer="below",
                      line=dict(width=4 if chosen else 0.5, color="black"))
    for status in STATUS_COLOURS:
        picked = [i for i, b in enumerate(boxes) if b[2] == status]
        if not picked:
            continue
        fig.add_trace(go.Scatter(
            x=[xs[i] for i in picked], y=[ys[i] for i in picked], mode="markers+text", name=labels[status],
            marker=dict(symbol="square", size=12, color=STATUS_COLOURS[status], opacity=0),
            text=[for_plotly(_short(boxes[i][3])) for i in picked], textfont=dict(size=12, color="black"),
            customdata=[[boxes[i][0] + 1, (boxes[i][1] + 1) if boxes[i][1] is not None else "-"] for i in picked],
            hovertemplate=labels["round"] + " %{customdata[0]}, " + labels["draft"] + " %{customdata[1]}: "
                          "%{text}<extra>" + labels[status] + "</extra>"))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=labels[status], showlegend=True,
                                 marker=dict(symbol="square", size=14, color=STATUS_COLOURS[status])))
    fig.update_traces(selector=dict(mode="markers+text"), showlegend=False)
    for slot_at, rnd_index in starts:
        fig.add_annotation(x=slot_at % PER_LINE - 0.45, y=-(slot_at // PER_LINE) + 0.42, text=f"{rnd_index + 1}",
                           showarrow=False, xanchor="left", font=dict(size=ROUND_FONT, color="#333"))
    lines = (max(-min(ys), 0) + 1) if ys else 1
    fig.update_xaxes(visible=False, range=[-0.6, PER_LINE - 0.4])
    fig.update_yaxes(visible=False, range=[-lines + 0.4, 0.6])
    fig.update_layout(title=labels["title"], height=110 + 62 * lines, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.02, yanchor="top"), plot_bgcolor="white")
    return fig


def _short(text: str) -> str:
    return text if len(text) <= 6 else text[:5] + "…"


def shown_pairs(pairs: list, must: int | None = None, size: int = SHOWN) -> list:
    """The candidates drawn: the drafted token, then p's and q's most likely in turn, ordered by p then q."""
    by_p, by_q = sorted(pairs, key=lambda c: -c.p), sorted(pairs, key=lambda c: -c.q)
    picked = {c.token_id: c for c in pairs if c.token_id == must}
    for a, b in zip(by_p, by_q):
        for c in (a, b):
            if len(picked) < size:
                picked.setdefault(c.token_id, c)
    return sorted(picked.values(), key=lambda c: (-c.p, -c.q))


def p_and_q(pairs: list, labels: dict, alpha: float, must: int | None = None) -> go.Figure:
    """p and q over the top candidates, drawn over each other: where both bars stand, the darker part is
    min(p, q), the overlap; its total over the whole vocabulary is the chance a draft is kept, 1 - TV(p, q).
    must: the drafted token, always among those drawn."""
    shown = shown_pairs(pairs, must)
    xs = [f"{i + 1}:{for_plotly(c.text)}" for i, c in enumerate(shown)]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=[c.p for c in shown], name=labels["p"], marker_color=BLUE, opacity=0.55))
    fig.add_trace(go.Bar(x=xs, y=[c.q for c in shown], name=labels["q"], marker_color=ORANGE, opacity=0.55))
    fig.add_trace(go.Bar(x=xs, y=[min(c.p, c.q) for c in shown], name=labels["overlap"].format(alpha=alpha),
                         marker=dict(color="rgba(0,0,0,0)", line=dict(color="black", width=1.5),
                                     pattern=dict(shape="/", fgcolor="#333", size=6))))
    fig.update_layout(barmode="overlay", title=labels["title"], height=340, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.3))
    fig.update_yaxes(title=labels["prob"], rangemode="tozero")
    fig.update_xaxes(type="category", tickangle=-45)
    return fig


def residual_bars(tokens: list, labels: dict) -> go.Figure:
    """norm(max(0, p - q)): where the target's token comes from at a rejection."""
    fig = go.Figure(go.Bar(x=[f"{i + 1}:{for_plotly(s.text)}" for i, s in enumerate(tokens)],
                           y=[s.prob for s in tokens], marker_color=BLUE, showlegend=False))
    fig.update_layout(title=labels["title"], height=340, margin=dict(l=10, r=10, t=50, b=10))
    fig.update_yaxes(title=labels["prob"], range=[0, 1])
    fig.update_xaxes(type="category", tickangle=-45)
    return fig


def u_against_ratio(u: float, ratio: float, labels: dict) -> go.Figure:
    """The test on a line from 0 to 1: the green part keeps (u <= min(1, p/q)), the red part rejects; u marked."""
    keep = min(ratio, 1.0)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[keep], y=[""], orientation="h", marker_color=GREEN, name=labels["keep"], opacity=0.7))
    fig.add_trace(go.Bar(x=[1 - keep], y=[""], orientation="h", marker_color=RED, name=labels["reject"],
                         opacity=0.7))
    fig.add_trace(go.Scatter(x=[u], y=[""], mode="markers+text", marker=dict(symbol="line-ns", size=40,
                                                                             line=dict(width=4, color="black")),
                             text=[f"u = {u:.3f}"], textposition="top center", name="u"))
    fig.update_layout(barmode="stack", title=labels["title"], height=170, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.5))
    fig.update_xaxes(range=[0, 1])
    return fig


def acceptance_bars(rates: list, counts: list, alpha: float, labels: dict) -> go.Figure:
    """The share of checked drafts kept at each draft position 1..K, beside the overall alpha."""
    xs = [str(i + 1) for i in range(len(rates))]
    fig = go.Figure(go.Bar(x=xs, y=rates, marker_color=GREEN, showlegend=False, text=[f"{c}" for c in counts],
                           textposition="outside",
                           hovertemplate=labels["position"] + " %{x}: %{y:.3f} (%{text})<extra></extra>"))
    fig.add_hline(y=alpha, line_dash="dash", line_color="#555", annotation_text=labels["alpha"].format(alpha=alpha))
    fig.update_layout(title=labels["title"], height=320, margin=dict(l=10, r=10, t=50, b=10))
    fig.update_yaxes(title=labels["rate"], range=[0, 1.1])
    fig.update_xaxes(title=labels["position"], type="category")
    return fig


def draw_histograms(p: list, texts: list, panels: list, labels: dict) -> go.Figure:
    """One panel per rule: the share of draws of each of the top tokens (bars) against p (black marks).
    panels: [(title, shares)] with shares in the order of p."""
    xs = [f"{i + 1}:{for_plotly(x)}" for i, x in enumerate(texts)]
    rows = (len(panels) + 1) // 2
    fig = make_subplots(rows=rows, cols=2, subplot_titles=[title for title, _ in panels], vertical_spacing=0.22)
    for k, (_, shares) in enumerate(panels):
        row, col = k // 2 + 1, k % 2 + 1
        fig.add_trace(go.Bar(x=xs, y=shares, marker_color=ORANGE, name=labels["drawn"], showlegend=k == 0),
                      row=row, col=col)
        fig.add_trace(go.Scatter(x=xs, y=p, mode="markers", marker=dict(symbol="line-ew", size=22,
                                                                        line=dict(width=3, color="black")),
                                 name=labels["p"], showlegend=k == 0), row=row, col=col)
        fig.update_xaxes(type="category", tickangle=-45, row=row, col=col)
    fig.update_layout(title=labels["title"], height=300 * rows + 80, margin=dict(l=10, r=10, t=70, b=10),
                      legend=dict(orientation="h", y=1.08, x=1, xanchor="right"))
    for note in fig.layout.annotations:
        note.font.size = 12
    return fig
