"""Re-rank a recorded beam search under another length penalty, without decoding again.

The running beams are chosen by cumulative logprob alone, so the length penalty only
touches the finished set: which hypotheses (EOS or max length) enter it, and when the
early-stop test ends the search. Both are replayed here from the recorded nodes:

  1. the hypotheses are the nodes that finished, plus the rank <= num_beams nodes that
     were pruned (a continuation in the first num_beams that did not keep running
     must have hit EOS or the length limit and been refused by the finished set);
  2. step by step, each step's hypotheses are scored cum_logprob / length ** lp and
     merged into a finished set of num_beams, best first;
  3. the search stops once the set is full and the best running beam, scored the same
     way, cannot beat its worst member (or when every continuation finished).
If the set or the stopping step differs from the recorded one, a new search may give
other results, and the page offers one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.decoding.beam import beam_score


@dataclass(frozen=True)
class Hypothesis:
    node_id: int
    text: str                # the generated tokens' display texts, joined
    length: int              # generated tokens
    cum_logprob: float
    score: float             # cum_logprob / length ** length_penalty
    in_set: bool             # in the finished set the search would return
    recorded_in_set: bool    # in the finished set of the recorded search


@dataclass(frozen=True)
class Rerank:
    length_penalty: float
    hypotheses: list          # [Hypothesis] best score first
    stop_step: int | None     # step where the replayed search stops; None = it would search on
    recorded_stop_step: int
    set_changed: bool         # the finished set differs from the recorded one
    stop_changed: bool        # the search would stop at another step (or go on)

    @property
    def needs_new_search(self) -> bool:
        return self.set_changed or self.stop_changed


def hypotheses_nodes(trace) -> list:
    """Nodes that were hypotheses: finished, or pruned within the first num_beams continuations."""
    beams = trace.config.num_beams
    return [n for n in trace.nodes if n.status == "finished" or (n.status == "pruned" and n.rank <= beams)]


def _replay(trace, length_penalty: float):
    """(finished set as node ids, stop step or None) under length_penalty."""
    beams = trace.config.num_beams
    by_step: dict = {}
    for node in hypotheses_nodes(trace):
        by_step.setdefault(node.step, []).append(node)
    done: list = []              # (score, node id), best first, at most `beams`
    can_improve = True
    nodes_at: dict = {}          # step -> its nodes, grouped once (a scan per step is quadratic in a long search)
    for node in trace.nodes:
        nodes_at.setdefault(node.step, []).append(node)
    for step in trace.steps:
        t = step.index
        full = len(done) >= beams
        if can_improve and not (trace.config.early_stopping and full):
            for node in by_step.get(t, []):
                done.append((beam_score(node.cum_logprob, node.length, length_penalty), node.id))
            done.sort(key=lambda item: -item[0])
            done = done[:beams]
        step_nodes = nodes_at.get(t, [])
        kept = [n for n in step_nodes if n.status == "kept"]
        if kept and len(done) >= beams:
            best = min(kept, key=lambda n: n.rank)      # the best running beam
            best_possible = beam_score(best.cum_logprob, best.length, length_penalty)
            if not best_possible > min(s for s, _ in done):
                can_improve = False
        all_hit = not kept
        if not can_improve or all_hit or (trace.config.early_stopping and len(done) >= beams):
            return [node_id for _, node_id in done], t
    return [node_id for _, node_id in done], None


def path_text(trace, node_id: int) -> str:
    """The generated text from the root to node_id."""
    return "".join(node.text for node in trace.path(node_id))


def rerank(trace, length_penalty: float) -> Rerank:
    """The recorded hypotheses ranked under `length_penalty`, and whether a new search is needed."""
    recorded_set, replayed_stop = _replay(trace, trace.config.length_penalty)
    new_set, new_stop = _replay(trace, length_penalty)
    last = trace.steps[-1].index if trace.steps else 0
    recorded_stop = last if replayed_stop is None else replayed_stop
    hyps = []
    for node in hypotheses_nodes(trace):
        if node.step > recorded_stop:
            continue
        hyps.append(Hypothesis(node_id=node.id, text=path_text(trace, node.id), length=node.length,
                               cum_logprob=node.cum_logprob,
                               score=beam_score(node.cum_logprob, node.length, length_penalty),
                               in_set=node.id in new_set, recorded_in_set=node.id in recorded_set))
    hyps.sort(key=lambda h: (-h.score if math.isfinite(h.score) else math.inf, h.node_id))
    return Rerank(length_penalty=length_penalty, hypotheses=hyps, stop_step=new_stop, recorded_stop_step=recorded_stop,
                  set_changed=set(new_set) != set(recorded_set),
                  stop_changed=_ends(trace, new_stop) != _ends(trace, replayed_stop))


def _ends(trace, stop: int | None) -> int | None:
    """Where a replay ends: its stop step; at the length limit a search that would go on ends at its last step
    all the same. A search cut short by Stop may go on (None): under its own penalty its replay goes on too."""
    if stop is None and len(trace.steps) >= trace.config.max_new_tokens and trace.steps:
        return trace.steps[-1].index
    return stop


@dataclass(frozen=True)
class Parting:
    """Where a hypothesis leaves another (the best one): the step, and each one's token there."""
    step: int                 # 0-based index of the first generated token that differs
    token: str | None         # this hypothesis' token there (None: it ended before)
    other: str | None         # the other hypothesis' token there (None: that one ended before)


def parting(trace, node_id: int, other_id: int) -> Parting | None:
    """Where the hypothesis ending at node_id leaves the one ending at other_id, compared token by token;
    None when they are the same path. Two hypotheses can read the same and still part, when the same text
    was cut into other tokens ("approx"+"imately" and "approxim"+"ately"), so their texts cannot tell."""
    mine, theirs = trace.path(node_id), trace.path(other_id)
    for index, (a, b) in enumerate(zip(mine, theirs)):
        if a.token_id != b.token_id:
            return Parting(index, a.text, b.text)
    if len(mine) == len(theirs):
        return None
    index = min(len(mine), len(theirs))
    return Parting(index, mine[index].text if index < len(mine) else None,
                   theirs[index].text if index < len(theirs) else None)


MARK = "┃"


def marked_text(trace, node_id: int, other_id: int, show=lambda text: text) -> str:
    """The hypothesis' whole text with MARK where it leaves the other one (no mark on the other's own path).
    show: how each token's text is written (visible whitespace, for instance)."""
    path = trace.path(node_id)
    where = parting(trace, node_id, other_id)
    cut = len(path) if where is None else where.step
    head, tail = "".join(show(n.text) for n in path[:cut]), "".join(show(n.text) for n in path[cut:])
    return head if where is None else head + MARK + tail
