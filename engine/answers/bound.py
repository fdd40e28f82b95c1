"""What holds the certificate back, and what would move it.

The bound (tree.Ledger.bound) is the largest mass an answer not found could have: either a prefix the
budget left unexpanded (its answers are below it), or a child an expanded prefix did not keep (the most
probable one left out). They call for different settings: more budget expands an open prefix, while no
budget ever reaches a child left out, since only the `branch` most probable children of a prefix are kept.
"""
from __future__ import annotations

from dataclasses import dataclass

OPEN = "open"            # a prefix the budget left unexpanded
LEFT_OUT = "left_out"    # a child not kept under an expanded prefix
NONE = "none"            # nothing bounds it: every prefix was followed to its end or the depth


@dataclass(frozen=True)
class Bound:
    kind: str            # OPEN, LEFT_OUT or NONE
    node_id: int         # the open prefix, or the prefix whose child was left out (-1 for NONE)
    mass: float          # the bound itself


def what_bounds(tree) -> Bound:
    """The node behind the tree's bound, the open prefix first when the two are equal (budget is the cheaper
    remedy)."""
    best = Bound(NONE, -1, 0.0)
    for n in tree.nodes:
        if not n.expanded and n.mass > 0 and (n.mass > best.mass or (n.mass == best.mass and best.kind != OPEN)):
            best = Bound(OPEN, n.id, n.mass)
        elif n.expanded and n.best_left_out > best.mass:
            best = Bound(LEFT_OUT, n.id, n.best_left_out)
    return best
