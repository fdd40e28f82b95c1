"""The lesson's view of a trace: what the page draws, step by step, as compact plain values.

A 64-step trace with 20 candidates a step is about 420 KB of JSON (logits, log-probs, stages, the KV cache);
the page needs a fifth of that, so the lesson carries columns (ids, texts, raw and shaped probabilities) with
numbers to 5 significant digits (the page shows 4 decimals). Texts stay as the trace has them: the page makes
whitespace visible and puts them on the page as text.
"""
from __future__ import annotations

import math

from ..config import WARPED_STRATEGIES

DIGITS = 5


def num(value) -> float | None:
    """A float to DIGITS significant digits; None for a missing or non-finite value (JSON has no inf)."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{DIGITS}g}")


def kind_of(trace) -> str:
    """'beam' when the trace holds a beam tree, else 'steps' (greedy, sampling, speculative, structured...)."""
    return "beam" if trace.nodes else "steps"


def step_view(step) -> dict:
    """One step: its candidates by raw rank (ids, texts, raw p, shaped p, kept, rank), the chosen token, entropy,
    and what a grammar's mask did when there was one."""
    cands = sorted(step.candidates, key=lambda c: c.rank)
    view = {"ids": [c.token_id for c in cands], "texts": [c.text for c in cands],
            "p": [num(c.prob) for c in cands], "q": [num(c.shaped_prob) for c in cands],
            "kept": [1 if c.kept else 0 for c in cands],
            "chosen": step.chosen_ids[0] if step.chosen_ids else None,
            "chosen_text": step.chosen_texts[0] if step.chosen_texts else "",
            "entropy": num(step.entropy), "shaped_entropy": num(step.shaped_entropy),
            "kept_count": step.kept_count, "removed_mass": num(step.removed_mass),
            "beams": list(step.beam_node_ids)}
    if not view["beams"]:
        del view["beams"]
    if [c.rank for c in cands] != list(range(1, len(cands) + 1)):     # ranks 1..n, the usual case, go unsaid
        view["rank"] = [c.rank for c in cands]
    if step.stages:        # [name, setting, tokens kept, mass removed, top-1 text, its probability] per processor
        view["stages"] = [[g.name, g.value, g.kept_count, num(g.removed_mass), g.top_text, num(g.top_prob)]
                          for g in step.stages]
    if step.grammar is not None:
        view["grammar"] = {"z": num(step.grammar.feasible_mass), "forced": step.grammar.forced,
                           "allowed": step.grammar.allowed}
    return view


def tree_rows(nodes: list) -> dict:
    """Each node's row in the finished tree, column by column: children under their parent's row, best rank
    first, centred on 0 (the app's beam tree lays it out the same way). Fixed for the whole search, so the tree
    grows in place as the steps go by."""
    rows, by_step = {}, {}
    for n in nodes:
        if n.parent is None:
            rows[n.id] = 0.0
        else:
            by_step.setdefault(n.step, []).append(n)
    for step in sorted(by_step):
        column = sorted(by_step[step], key=lambda n: (rows.get(n.parent, 0.0), n.rank))
        for i, n in enumerate(column):
            rows[n.id] = i - (len(column) - 1) / 2
    return rows


def tree_view(trace) -> dict:
    """The beam tree: [id, parent, step, text, status, cumulative logprob, score, row] per node, and the best
    sequence's path."""
    rows = tree_rows(trace.nodes)
    nodes = [[n.id, n.parent, n.step, n.text, n.status, num(n.cum_logprob), num(n.score), rows.get(n.id, 0.0)]
             for n in trace.nodes]
    best = [n.id for n in trace.path(trace.best.node_id)] if trace.sequences else []
    return {"nodes": nodes, "best": best}


def config_view(config) -> dict:
    return {"strategy": config.strategy, "temperature": config.temperature, "top_k": config.top_k,
            "top_p": config.top_p, "min_p": config.min_p, "num_beams": config.num_beams,
            "length_penalty": config.length_penalty,
            "warped": config.strategy in WARPED_STRATEGIES}     # the top-p line applies (as on the app's chart)


def lesson_view(trace) -> dict:
    """Everything the page shows of the trace."""
    view = {"kind": kind_of(trace), "model": trace.model, "prompt": trace.prompt, "config": config_view(trace.config),
            "steps": [step_view(s) for s in trace.steps],
            "sequences": [{"text": s.text, "score": num(s.score)} for s in trace.sequences]}
    if view["kind"] == "beam":
        view["tree"] = tree_view(trace)
    if trace.rounds:
        view["rounds"] = rounds_view(trace.rounds)
    return view


def rounds_view(rounds: list) -> list:
    """Speculative decoding's rounds: the step of each round's first token, its drafts as [text, q, p, status]
    (kept, rejected, unchecked), and the target's own token after them as [text, kind] (corrected, bonus; none
    when the round ended at a kept end-of-text)."""
    return [{"first": r.first_step, "drafts": [[d.text, num(d.q), num(d.p), d.status] for d in r.drafts],
             "next": [r.next_text, r.next_kind] if r.next_id is not None else None} for r in rounds]
