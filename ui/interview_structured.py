"""The Interview page's follow-up chain on structured output: JSON mode, what it costs, when it hurts.

Each answer ends with a link that opens the Structured output page on the settings that show it.
"""
from __future__ import annotations

from ui.grammar_examples import EXAMPLES
from ui.interview_chain import chain_card

# question -> the Structured output page's settings that demonstrate its answer
DEMOS = (
    {"so_kind": "json_schema", "so_example": "city", "so_strategy": "greedy", "so_step": "1", "max_new_tokens": "32"},
    {"so_kind": "json_schema", "so_example": "person", "so_strategy": "greedy", "max_new_tokens": "64"},
    {"so_kind": "regex", "so_example": "date", "so_strategy": "greedy", "max_new_tokens": "16"},
)


def with_grammar(settings: dict) -> dict:
    """A demo's settings with its example's text: a link then sets the grammar box too, even in a session
    whose box holds another grammar."""
    return {**settings, "so_grammar": EXAMPLES[settings["so_kind"]][settings["so_example"]]}


def structured_chain(demo_params) -> None:
    """The card (ui.interview_chain): questions one after the other, each answer on demand with its demo link.
    demo_params: the Interview page's function that turns a page's settings into a link's query string."""
    chain_card("so", "structured", DEMOS, demo_params, settings_of=with_grammar)
