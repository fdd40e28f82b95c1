"""What Whole answers says in sentences about a run: a strategy's name, why the top answers are not
certified yet and what would help, and what each entropy is taken over.

Every text that comes from a run (an answer, a prefix, a name read from a file) goes in through `literal`:
Markdown and HTML escaped, whitespace made visible, and isolated from the sentence around it (U+2068 ...
U+2069), so that right-to-left marks inside it cannot turn the rest of the sentence around.
"""
from __future__ import annotations

import re

from engine.answers.bound import LEFT_OUT, NONE, what_bounds
from engine.answers.meaning import answer_entropy, count_entropy, group_entropy, normalise
from figures.labels import for_markdown, visible
from ui.i18n import t

FIRST_STRONG_ISOLATE, POP_ISOLATE = "\u2068", "\u2069"
_BEAM = re.compile(r"beam ([0-9]+)")
SHOWN_CHARS = 200          # of one text inside a sentence


def literal(text: str, limit: int = SHOWN_CHARS) -> str:
    """A run's text inside a Markdown sentence, shown as it is (cut to `limit` characters)."""
    if not text:
        return t("answers.empty")
    cut = text if len(text) <= limit else text[:limit] + "…"
    return FIRST_STRONG_ISOLATE + for_markdown(visible(cut)) + POP_ISOLATE


def strategy_label(name: str) -> str:
    """'greedy' and 'beam W' in the page's language; any other name (none is read from a file) literally."""
    if name == "greedy":
        return t("answers.greedy")
    width = _BEAM.fullmatch(name)
    if width:
        return t("answers.beam_n", n=int(width.group(1)))
    return literal(name, 40)


def _share(x: float) -> str:
    return f"{x:.3g}" if x >= 1e-4 else f"{x:.2e}"


def certificate_line(tree) -> str:
    """Why no answer is certified yet, against the best answer found, and what would settle it: more budget
    for an open prefix, more children kept per prefix for a child left out (no budget reaches it)."""
    bound = what_bounds(tree)
    if bound.kind == NONE:
        return t("answers_run.no_answer_within", depth=tree.settings.depth)
    text = "".join(n.text for n in tree.path(bound.node_id))
    prefix = literal(text) if text else t("answers_run.start")
    key = "left" if bound.kind == LEFT_OUT else "open"
    if not tree.answers:
        return t(f"answers_run.none_found_{key}", prefix=prefix, bound=_share(bound.mass))
    best = tree.answers[0]
    return t(f"answers_run.not_certified_{key}", best=literal(best.text), p=_share(best.prob), prefix=prefix,
             bound=_share(bound.mass))


def entropy_lines(tree, samples) -> str:
    """The answers' entropy, said to be renormalised over the mass the tree found (and how much that is), and
    the samples' entropy, said to be by counts over every outcome drawn, with why it comes out different."""
    covered = tree.ledger.answers
    line = t("answers_run.answer_entropy", h=f"{answer_entropy(tree.answers):.3f}",
             g=f"{group_entropy(tree.answers):.3f}", n=len(tree.answers),
             k=len({normalise(a.text) for a in tree.answers}), covered=f"{covered:.2%}",
             rest=f"{max(0.0, 1 - covered):.2%}")
    if samples is not None:
        labels = [normalise(o.text) for o in samples.outcomes for _ in range(o.count)]
        line += "\n\n" + t("answers_run.sample_entropy", h=f"{count_entropy(labels):.3f}", n=samples.samples,
                           k=len(set(labels)), rest=f"{max(0.0, 1 - covered):.2%}")
    return line
