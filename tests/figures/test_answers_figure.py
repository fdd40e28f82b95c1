"""The Whole answers tree figure: each part of the ledger has its own colour and legend entry, and its bars add
up to the ledger's number, however small the open prefixes are."""
from __future__ import annotations

import pytest

from engine.answers import TreeSettings, grow_tree
from figures.answers import COLOURS, KINDS, icicle
from tiny_models import tiny_llama

pytestmark = pytest.mark.tiny
LABELS = {**{k: k for k in KINDS}, "column": "c", "mass": "m", "nats": "nats", "title": "t", "groups": "{n}"}


@pytest.mark.parametrize("depth", [2, 3])
def test_open_prefixes_have_their_own_colour_and_add_up_to_the_ledgers_share(depth):
    """A small budget leaves many open prefixes, most of them smaller than the figure's smallest bar: they are
    still drawn in the open prefixes' colour (never lumped with the pale 'smaller branches'), and with the bars of
    the cut at the depth they make the ledger's 'prefixes' share; every column still adds up to at most 1."""
    lm = tiny_llama()
    tree = grow_tree(lm, lm.tokenizer("The capital of")["input_ids"], TreeSettings(depth=depth, budget=20, branch=6))
    ledger = tree.ledger
    assert ledger.open_prefixes > 0
    assert any(0 < n.mass < 0.002 for n in tree.nodes if not n.expanded)      # some open prefixes are tiny
    fig = icicle(tree, LABELS)
    traces = {tr.name: tr for tr in fig.data}
    assert "open" in traces and traces["open"].showlegend is not False
    assert sum(traces["open"].y) == pytest.approx(ledger.open_prefixes, rel=1e-9)
    assert (ledger.cut_at_depth > 0) == (depth == 2)
    cut = sum(traces["cut"].y) if "cut" in traces else 0.0
    assert cut == pytest.approx(ledger.cut_at_depth, rel=1e-9, abs=1e-15)
    columns: dict = {}
    for trace in fig.data:
        for x, y in zip(trace.x, trace.y):
            columns[x] = columns.get(x, 0) + y
    assert columns[1] == pytest.approx(1, abs=1e-9) and all(v <= 1 + 1e-9 for v in columns.values())
    colours = [COLOURS[k] for k in KINDS]
    assert len(set(colours)) == len(colours)
    assert traces["open"].marker.color not in (COLOURS["prefix"], COLOURS["small"])
