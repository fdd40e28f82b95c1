"""Generated text as escaped HTML, each token coloured by its probability or its rank (GLTR-style).

Token texts are escaped (a token `<b>` shows as `<b>`), whitespace stays readable
(newlines become ⏎ plus a line break), and every token has a hover with its numbers.
Backgrounds are light with dark text, so the view reads the same in light and dark themes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from figures.labels import NEWLINE, for_html, visible

# GLTR-style buckets: (highest rank in the bucket, background)
RANK_BUCKETS = ((1, "#a6dba0"), (10, "#fee08b"), (100, "#fdae61"), (math.inf, "#d7b5e8"))


@dataclass(frozen=True)
class TokenView:
    text: str
    prob: float | None        # raw probability of the token at its step
    rank: int | None          # raw rank (1 = most likely); None when unknown (beam lanes)
    step: int
    forced: bool = False


def tokens_of(trace) -> list:
    """TokenViews of the trace's first sequence (the decode's text, or the best beam)."""
    if trace.nodes and trace.best.node_id is not None:
        path = trace.path(trace.best.node_id)
        return [TokenView(n.text, math.exp(n.logprob) if n.logprob is not None and math.isfinite(n.logprob) else 0.0,
                          None, n.step) for n in path]
    out = []
    for step in trace.steps:
        cand = step.chosen
        out.append(TokenView(step.chosen_texts[0], cand.prob if cand else None, cand.rank if cand else None,
                             step.index, forced=step.index in trace.forced))
    return out


def prob_colour(p: float | None) -> str:
    """Red (unlikely) through yellow to green (likely), light enough for dark text."""
    if p is None:
        return "#dddddd"
    hue = 120.0 * min(max(p, 0.0), 1.0)
    return f"hsl({hue:.0f}, 75%, 78%)"


def rank_colour(rank: int | None) -> str:
    if rank is None:
        return "#dddddd"
    return next(colour for limit, colour in RANK_BUCKETS if rank <= limit)


def token_html(tokens: list, mode: str = "prob", mark_step: int | None = None, current_step: int | None = None,
               words: dict | None = None, flagged: set | frozenset = frozenset()) -> str:
    """HTML for a token list. mode 'prob' or 'rank'; mark_step gets a bar before it (where a lane parts);
    current_step is outlined solid, `flagged` steps (What happened? findings) dashed.
    words: translated hover words (step, p, rank, forced, flagged)."""
    w = {"step": "step", "p": "p", "rank": "rank", "forced": "forced", "parts": "parts here", "flagged": "flagged"}
    w.update(words or {})
    spans = []
    for tok in tokens:
        colour = rank_colour(tok.rank) if mode == "rank" else prob_colour(tok.prob)
        hover = f"{w['step']} {tok.step + 1}: {visible(tok.text)}"
        if tok.prob is not None:
            hover += f" · {w['p']} = {tok.prob:.4f}"
        if tok.rank is not None:
            hover += f" · {w['rank']} {tok.rank}"
        if tok.forced:
            hover += f" · {w['forced']}"
        style = f"background:{colour};color:#111;border-radius:3px;padding:1px 1px;margin:0 1px;"
        if tok.step in flagged:
            hover += f" · {w['flagged']}"
        if tok.step == current_step:
            style += "outline:2px solid #e45756;"
        elif tok.step in flagged:
            style += "outline:2px dashed #7b3fbf;outline-offset:1px;"
        if tok.forced:
            style += "text-decoration:underline wavy #e45756;"
        body = for_html(tok.text).replace("\r\n", "\n").replace("\n", NEWLINE + "<br>") if tok.text else "∅"
        if tok.text.strip() == "" and "\n" not in tok.text:
            body = for_html(visible(tok.text))   # a token that is only spaces would vanish otherwise
        marker = ""
        if mark_step is not None and tok.step == mark_step:
            marker = (f'<span title="{for_html(w["parts"])}" style="color:#e45756;font-weight:bold;'
                      f'margin:0 2px;">┃</span>')
        spans.append(f'{marker}<span title="{for_html(hover)}" style="{style}">{body}</span>')
    return ('<div style="font-family:ui-monospace,Menlo,Consolas,monospace;font-size:0.95rem;line-height:1.9;'
            'white-space:pre-wrap;word-break:break-word;">' + "".join(spans) + "</div>")


def legend_html(mode: str, words: dict) -> str:
    """A one-line legend for the colouring; words has 'low'/'high' (prob) or 'top1'.. 'beyond' (rank)."""
    if mode == "rank":
        items = [(RANK_BUCKETS[0][1], words["top1"]), (RANK_BUCKETS[1][1], words["top10"]),
                 (RANK_BUCKETS[2][1], words["top100"]), (RANK_BUCKETS[3][1], words["beyond"])]
    else:
        items = [(prob_colour(0.0), words["low"]), (prob_colour(0.5), "0.5"), (prob_colour(1.0), words["high"])]
    return " ".join(f'<span style="background:{c};color:#111;border-radius:3px;padding:1px 6px;'
                    f'font-size:0.8rem;">{for_html(label)}</span>' for c, label in items)
