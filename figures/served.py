"""What a figure drawn from a served model's trace says about itself.

A server reports each step's top-N tokens, not the whole distribution: the listed
probabilities are exact, and the rest of the mass is one "other" share that nothing names.
The badge goes onto the figure itself, so it travels with an exported HTML file too.
"""
from __future__ import annotations

import html

from .labels import wrapped

BADGE = ("top-{n} from {kind} at {url}, {numbers}: the listed tokens are exact, "
         "the other {other} is shown as 'other'")
# what the numbers are (model_facts["served"]["logprobs"], engine/served/numbers.py): a figure of processed
# numbers must not read as the model's own distribution
NUMBERS = {"raw": "raw numbers (before its sampler)",
           "processed": "PROCESSED numbers (after its sampler, not the model's own distribution)",
           "unknown": "numbers that may be raw or after its sampler"}


def served_facts(trace) -> dict | None:
    """The trace's `model_facts["served"]` (url, server, top_n, exact), or None for a local trace."""
    facts = getattr(trace, "model_facts", None)
    served = facts.get("served") if isinstance(facts, dict) else None
    return served if isinstance(served, dict) else None


def other_mass(step) -> float:
    """The probability a step's listed candidates leave out: 1 - their raw probabilities' sum (never below 0)."""
    return max(0.0, 1.0 - sum(c.prob for c in step.candidates))


def numbers_kind(trace) -> str | None:
    """'raw', 'processed' or 'unknown' (a trace from before they were recorded) for a served trace; None for
    a local one."""
    served = served_facts(trace)
    if served is None:
        return None
    kind = served.get("logprobs")
    return kind if kind in NUMBERS else "unknown"


def badge_text(trace, record, template: str = BADGE, phrases: dict = NUMBERS, **extra) -> str | None:
    """The badge for one step (`record`, a Step) of a served trace (plain text), or None for a local trace.
    `phrases` says what the numbers are, per kind (NUMBERS' keys); `extra` fills a template's other places."""
    served = served_facts(trace)
    if served is None:
        return None
    other = other_mass(record) if record is not None else None
    return template.format(n=served.get("top_n", "?"), kind=str(served.get("server", "?")),
                           url=str(served.get("url", "?")), other="?" if other is None else f"{other:.1%}",
                           numbers=phrases[numbers_kind(trace)], **extra)


LINE_CHARS = 110      # a subtitle line that fits a chart on a laptop screen


def with_badge(fig, text: str | None):
    """The figure with `text` as a subtitle under its title, in lines of at most LINE_CHARS (room made
    above the plot); unchanged for None."""
    if not text:
        return fig
    lines = wrapped(text, LINE_CHARS) or [text]
    shown = "<br>".join(html.escape(line, quote=False).replace("%{", "%&#123;") for line in lines)
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 80
    fig.update_layout(title=dict(subtitle=dict(text=shown, font=dict(size=12, color="#b45309"))),
                      margin=dict(t=top + 18 * len(lines) + 6))
    return fig
