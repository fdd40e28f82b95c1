"""Trace: the record of one decode, as plain Python values, with JSON in and out.

A trace holds everything a figure needs (candidates per step, the beam tree, the
fed-back vectors' nearest words, the KV cache per step), so it can be shown, shared
and replayed without the model. Reading a file goes through reader.py, then check.py.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field

from ..config import DecodeConfig
from ..errors import ConfigError, TraceFormatError, shortened
from .check import check
from .reader import finite, read_json, reason, trace_fields
from .records import Sequence

SCHEMA = "decodescope.trace/1"


@dataclass(frozen=True)
class Trace:
    model: str
    prompt: str
    prompt_token_ids: list
    config: DecodeConfig
    steps: list
    sequences: list
    nodes: list = field(default_factory=list)
    model_facts: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    forced: dict = field(default_factory=dict)      # step index -> token id forced there (branches)
    findings: dict = field(default_factory=dict)    # analysis results, filled by engine.explain.findings
    rounds: list = field(default_factory=list)      # [Round] speculative decoding's draft-and-check rounds
    schema: str = SCHEMA

    # ---- views -------------------------------------------------------------
    @property
    def best(self) -> "Sequence":
        return self.sequences[0]

    @functools.cached_property
    def nodes_by_id(self) -> dict:
        """The beam tree's nodes by id (built once per trace; not a field, so not in the JSON)."""
        return {n.id: n for n in self.nodes}

    def path(self, node_id: int | None) -> list:
        """[Node] of the beam tree from the first generated token down to node_id, the root left out:
        the one leaf-to-root walk every view uses. Empty for None, or when there is no such node."""
        by_id = self.nodes_by_id
        path, node = [], by_id.get(node_id)
        while node is not None and node.parent is not None and len(path) <= len(by_id):   # bounded, even on a cycle
            path.append(node)
            node = by_id.get(node.parent)
        return path[::-1]

    def graph(self):
        """The beam tree as a networkx.DiGraph; node attributes are the Node fields."""
        import networkx as nx

        g = nx.DiGraph()
        for node in self.nodes:
            g.add_node(node.id, **dataclasses.asdict(node))
            if node.parent is not None:
                g.add_edge(node.parent, node.id)
        return g

    # ---- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["config"] = self.config.to_dict()
        out["forced"] = {str(k): v for k, v in self.forced.items()}
        return finite(out)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Trace":
        """Read a trace file, checking all of it (shape, types, consistency) before anyone uses it.

        Raises TraceFormatError with one sentence naming the first problem. The size, nesting
        and container limits bound the memory and time one file can cost."""
        return cls.from_dict(read_json(text))

    @classmethod
    def from_dict(cls, data) -> "Trace":
        if not isinstance(data, dict):
            raise TraceFormatError("trace must be a JSON object with a 'schema' field")
        schema = data.get("schema")
        if not isinstance(schema, str) or not schema.startswith("decodescope.trace/"):
            raise TraceFormatError("not a DecodeScope trace: the 'schema' field is missing or wrong")
        try:
            version = int(schema.rsplit("/", 1)[1])
        except ValueError:
            raise TraceFormatError(f"unreadable schema '{schema[:80]}'") from None
        if version > 1:
            raise TraceFormatError(f"trace schema '{schema[:80]}' is newer than this DecodeScope reads ({SCHEMA}); "
                                   "update DecodeScope")
        try:
            trace = cls(**trace_fields(data))
        except ConfigError as exc:
            raise TraceFormatError(f"trace config is invalid: {shortened(str(exc))}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TraceFormatError(f"trace has the wrong shape: {shortened(reason(exc))}") from None
        check(trace)
        return trace


