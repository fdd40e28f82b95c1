"""Each node of a saved tree checked against its own split, so that a file cannot move mass from one node to
another, or claim a smaller bound, while its total still adds up to 1.

Expanding a node v splits its mass m(v) exactly (tree.py):

    m(v) * p(end | v)  +  the masses of its children  +  left_out  +  cut  =  m(v)

with `cut` only at the depth and `left_out` only before it; the children are the `branch` most probable
tokens, so the most probable child left out (`best_left_out`, which the certificate reads) is no more than
what was left out nor than any child kept, is above 0 when something was left out, and is 0 when fewer than
`branch` children were kept; the answer ending at v has probability m(v) * p(end | v). A node not expanded
has none of these. The ledger and the certificate are worked out from these fields, so each is checked here
and the first lie is named by its node and field.
"""
from __future__ import annotations

import math

TOLERANCE = 1e-6     # relative: a run's splits agree to about 1e-15 (float64); a lie under this changes no digit shown
TINY = 1e-300        # masses that underflow to subnormals lose their relative precision


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b)) + TINY


def _at_most(a: float, b: float) -> bool:
    return a <= b + TOLERANCE * b + TINY


def check_nodes(nodes: list, answers: list, settings, expansions: int) -> None:
    """Raise ValueError naming the first node (or answer) whose own numbers do not hold together."""
    masses = [n.mass for n in nodes]
    children = [0] * len(nodes)
    children_mass = [0.0] * len(nodes)
    smallest_child = [math.inf] * len(nodes)
    seen: set = set()
    for n in nodes[1:]:
        if (n.parent, n.token_id) in seen:
            raise ValueError(f"node {n.id}: token {n.token_id} is already a child of node {n.parent}")
        seen.add((n.parent, n.token_id))
        children[n.parent] += 1
        children_mass[n.parent] += masses[n.id]
        smallest_child[n.parent] = min(smallest_child[n.parent], masses[n.id])
    answers_of: dict = {}
    for a in answers:
        answers_of.setdefault(a.node_id, []).append(a)
    expanded = 0
    for n in nodes:
        if not n.expanded:
            for field in ("end_prob", "left_out", "cut", "best_left_out"):
                if getattr(n, field):
                    raise ValueError(f"node {n.id}: {field} is {getattr(n, field):.6g}, but the node was not "
                                     "expanded, so nothing was measured there")
            continue
        expanded += 1
        _check_split(n, masses[n.id], children[n.id], children_mass[n.id], smallest_child[n.id], settings)
        _check_answers(n, masses[n.id], answers_of.get(n.id, []), settings)
    if expanded != expansions:
        raise ValueError(f"expansions: {expansions:,}, but {expanded:,} nodes are expanded")


def _check_split(n, mass: float, count: int, kept: float, smallest: float, settings) -> None:
    for field in ("entropy", "varentropy"):
        value = getattr(n, field)
        if not (math.isfinite(value) and value >= -TOLERANCE):
            raise ValueError(f"node {n.id}: {field} must be a number at least 0 for an expanded node, "
                             f"got {value:.6g}")
    if count > settings.branch:
        raise ValueError(f"node {n.id}: {count} children, more than the branch of {settings.branch}")
    if n.depth == settings.depth and n.left_out:
        raise ValueError(f"node {n.id}: left_out is {n.left_out:.6g} at the depth {settings.depth}, where "
                         "every continuation is cut, not left out")
    if n.depth < settings.depth and n.cut:
        raise ValueError(f"node {n.id}: cut is {n.cut:.6g} before the depth {settings.depth}; only a node at "
                         "the depth has its continuations cut")
    split = mass * n.end_prob + kept + n.left_out + n.cut
    if not _close(split, mass):
        raise ValueError(f"node {n.id}: its split (end {mass * n.end_prob:.6g} + children {kept:.6g} + left_out "
                         f"{n.left_out:.6g} + cut {n.cut:.6g}) is {split:.6g}, not its mass {mass:.6g}")
    best = n.best_left_out
    if not _at_most(best, n.left_out):
        raise ValueError(f"node {n.id}: best_left_out {best:.6g} is more than its left_out {n.left_out:.6g}")
    if settings.stops:                   # answers left out count too: the checks below are for children alone
        return
    if count and not _at_most(best, smallest):
        raise ValueError(f"node {n.id}: best_left_out {best:.6g} is more than its least probable child kept "
                         f"({smallest:.6g}); the children kept are the most probable")
    if n.depth < settings.depth:
        if count < settings.branch and (best or n.left_out > TOLERANCE * mass):
            raise ValueError(f"node {n.id}: left_out {n.left_out:.6g} and best_left_out {best:.6g} with only "
                             f"{count} children kept of {settings.branch}: every other token had probability 0")
        if n.left_out > TOLERANCE * mass and not best:
            raise ValueError(f"node {n.id}: best_left_out is 0 while left_out is {n.left_out:.6g}; a child left "
                             "out with probability above 0 bounds every answer not found")


def _check_answers(n, mass: float, here: list, settings) -> None:
    """The answers ending after n share its end share: one answer at an end token, or up to `branch` with stop
    strings (one per text the stopping tokens leave; stops.py)."""
    end = mass * n.end_prob
    if not here:
        if n.end_prob > 0:
            raise ValueError(f"node {n.id}: end_prob is {n.end_prob:.6g}, but no answer ends after it")
        return
    if len(here) > (settings.branch if settings.stops else 1):
        raise ValueError(f"answers: {len(here)} answers end after node {n.id}, more than the run keeps")
    total = sum(a.prob for a in here)
    if not _close(total, end):
        what = "the answer after node {} has" if len(here) == 1 else f"the {len(here)} answers after node {{}} have"
        raise ValueError(f"answers: {what.format(n.id)} probability {total:.6g}, not its "
                         f"node's end share {end:.6g} (mass {mass:.6g} x end_prob {n.end_prob:.6g})")
