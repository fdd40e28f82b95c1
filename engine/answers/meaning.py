"""How sure the model is of its answer, not of its next token: answers grouped by what they say.

Grouping here is by exact text after normalising case, spaces and closing punctuation, with no second
model: "Paris." and " paris" are one answer, "Paris" and "the French capital" are two. That is a first,
honest step towards grouping by meaning (which needs an entailment model); the page says so.

Two entropies over groups:
  - from the tree: each group's exact mass among the answers found, renormalised (the mass the tree did not
    reach is not in it, and the page shows how much that is);
  - from samples, by counts alone (the discrete form): ids [0, 1, 2, 1] -> 1.0397 nats.
"""
from __future__ import annotations

import math
import unicodedata
from collections import Counter, defaultdict

_CLOSING = ".!?。！？…,，;；:：\"'“”‘’)）]】"


def normalise(text: str) -> str:
    """The key two answers share when they say the same words: NFKC, case folded, spaces collapsed,
    closing punctuation dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = " ".join(folded.split())
    return words.rstrip(_CLOSING).strip()


def entropy_of(weights) -> float:
    """Entropy in nats of non-negative weights, renormalised (0 for none)."""
    weights = [w for w in weights if w > 0]
    total = sum(weights)
    if total <= 0:
        return 0.0
    return -sum(w / total * math.log(w / total) for w in weights)


def groups(answers) -> dict:
    """normalised text -> [answers], for anything with `.text` (tree answers, sample outcomes)."""
    out = defaultdict(list)
    for a in answers:
        out[normalise(a.text)].append(a)
    return dict(out)


def answer_entropy(answers) -> float:
    """Entropy over the answers found (each its own outcome), from their exact masses renormalised."""
    return entropy_of([a.prob for a in answers])


def group_entropy(answers) -> float:
    """Entropy over the groups of the answers found, from their exact masses renormalised."""
    return entropy_of([sum(a.prob for a in members) for members in groups(answers).values()])


def count_entropy(labels) -> float:
    """The discrete form: entropy of the groups' shares of the samples, by counts alone."""
    return entropy_of(list(Counter(labels).values()))


def forks(tree) -> dict:
    """For each expanded node with answers below it: the number of groups among those answers. A node
    whose answers all fall in one group only rephrases; two or more, and its fork changes the answer."""
    below = defaultdict(set)
    for a in tree.answers:
        key = normalise(a.text)
        node = a.node_id
        while node >= 0:
            below[node].add(key)
            node = tree.nodes[node].parent
    return {node: len(keys) for node, keys in below.items()}
