"""Trace: the record of one decode, as plain Python values, with JSON in and out.

A trace holds everything a figure needs (candidates per step, the beam tree, the
fed-back vectors' nearest words, the KV cache per step), so it can be shown, shared
and replayed without the model. Records are frozen dataclasses of plain values.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from dataclasses import dataclass, field

from .config import DecodeConfig
from .errors import ConfigError, TraceFormatError

SCHEMA = "decodescope.trace/1"
MAX_TRACE_BYTES = 20_000_000       # 20 MB, decimal


@dataclass(frozen=True)
class Candidate:
    """One of the top-N tokens at a step: what the model said and what the strategy did."""
    token_id: int
    text: str            # display text (byte pieces as <0xE4>)
    logit: float
    prob: float          # softmax of the raw logits
    logprob: float
    rank: int            # 1 = most likely under the raw distribution
    shaped_prob: float   # probability after temperature / top-k / top-p / min-p / penalty
    kept: bool           # survived truncation (shaped_prob > 0)


@dataclass(frozen=True)
class Neighbour:
    token_id: int
    text: str
    value: float         # cosine similarity, or mixture weight


@dataclass(frozen=True)
class FeedBack:
    """For soft and gumbel: the vector fed back instead of a token embedding."""
    nearest: list        # [Neighbour] by cosine, best first (10)
    nearest_cosine: float
    weights: list        # [Neighbour] the mixture's largest weights (10)
    argmax_id: int
    argmax_text: str
    entropy: float       # entropy of the mixture weights, in nats
    norm: float          # |e|
    nearest_norm: float  # |E[nearest]|


@dataclass(frozen=True)
class KVStep:
    """The KV cache after this step. rows/bytes are read off the real cache tensors;
    paged_* is the accounting of a shared-prefix cache (blocks of 16, ref-counted)."""
    rows: int            # token rows held, summed over beams
    bytes: int
    rows_appended: int
    rows_copied: int     # rows moved into a slot by a beam reorder
    paged_rows: int      # distinct rows a shared-prefix cache would hold
    paged_blocks: int
    paged_bytes: int     # blocks * block_size * bytes per row
    beam_rows: list      # rows per beam slot


@dataclass(frozen=True)
class StageToken:
    token_id: int
    text: str
    prob: float          # probability in the distribution the stage received


@dataclass(frozen=True)
class Stage:
    """The distribution after one logits processor, in the order transformers applies them."""
    name: str            # repetition_penalty | temperature | top_k | top_p | min_p
    value: float         # the setting (1.3, 0.7, 50, 0.9, 0.05)
    kept_count: int      # tokens still possible after this stage
    cut_count: int       # tokens this stage removed
    removed_mass: float  # probability mass, in the distribution it received, of the tokens it removed
    probs: list          # renormalised probability of each of the step's candidates, in their order
    top_id: int          # top-1 token after this stage
    top_text: str
    top_prob: float
    cut: list = field(default_factory=list)   # [StageToken] the first tokens it removed, in rank order


@dataclass(frozen=True)
class Step:
    index: int                      # 0 = the first generated token
    candidates: list                # [Candidate] top-N, for beams: of the best running beam
    entropy: float                  # raw distribution, nats
    shaped_entropy: float
    removed_mass: float             # raw mass of tokens the strategy cut
    kept_count: int                 # tokens with shaped prob > 0
    chosen_ids: list                # one id, or one per beam kept
    chosen_texts: list
    feedback: FeedBack | None = None
    kv: KVStep | None = None
    beam_node_ids: list = field(default_factory=list)   # running beams' node ids after this step
    seconds: float = 0.0            # wall time of this step's forward pass and choice
    stages: list = field(default_factory=list)          # [Stage] one per processor; empty in older traces

    @property
    def chosen(self) -> "Candidate | None":
        """The candidate record of the (first) chosen token, when it is among the recorded candidates."""
        if not self.chosen_ids:
            return None
        return next((c for c in self.candidates if c.token_id == self.chosen_ids[0]), None)


@dataclass(frozen=True)
class Node:
    """A beam-search expansion: one of the 2*num_beams continuations the search ranked."""
    id: int
    parent: int | None              # None for the root (the prompt)
    step: int                       # -1 for the root
    token_id: int
    text: str
    logprob: float                  # step logprob of this token
    cum_logprob: float
    score: float                    # cum_logprob / length ** length_penalty
    length: int                     # generated tokens up to and including this one
    status: str                     # root | kept | pruned | finished
    beam: int                       # slot of the parent beam
    rank: int                       # rank among this step's continuations (1 = best)


@dataclass(frozen=True)
class Sequence:
    token_ids: list                 # generated tokens only
    text: str
    cum_logprob: float
    score: float
    node_id: int | None = None      # leaf in the beam tree


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
    findings: dict = field(default_factory=dict)    # analysis results, filled by engine.explain
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
        return _finite(out)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Trace":
        """Read a trace file, checking all of it (shape, types, consistency) before anyone uses it.

        Raises TraceFormatError with one sentence naming the first problem. The size, nesting
        and container limits bound the memory and time one file can cost."""
        if isinstance(text, bytes | bytearray):
            _check_size(len(text))
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise TraceFormatError("trace is not UTF-8 text; expected a DecodeScope JSON trace") from None
        else:
            _check_size(len(text.encode("utf-8", "surrogatepass")))
        _check_structure(text)
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except (json.JSONDecodeError, ValueError) as exc:
            raise TraceFormatError(f"trace is not valid JSON ({exc})") from None
        return cls.from_dict(data)

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
            trace = _build_trace(data)
        except ConfigError as exc:
            raise TraceFormatError(f"trace config is invalid: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TraceFormatError(f"trace has the wrong shape: {_reason(exc)}") from None
        from .trace_check import check

        check(trace)
        return trace


# ---- limits on one file ------------------------------------------------------------
MAX_DEPTH = 20                  # a real trace nests 7 deep (findings -> sequences -> loop -> token_ids)
MAX_CONTAINERS = 500_000        # JSON objects and arrays; a 20 MB trace of real steps holds about 150,000
_ESCAPE = re.compile(r"\\.", re.DOTALL)       # each pattern repeats one character class only, so
_STRING = re.compile(r'"[^"]*"')                # the regex engine keeps no state per character
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _check_size(size: int) -> None:
    if size > MAX_TRACE_BYTES:
        raise TraceFormatError(f"trace is {size / 1e6:,.1f} MB; the limit is {MAX_TRACE_BYTES / 1e6:g} MB")


def _check_structure(text: str) -> None:
    """Refuse deep nesting and floods of tiny containers before parsing: json.loads would
    recurse once per level (RecursionError) and spend ~60 bytes per empty [] or {}."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text)))   # text may hold brackets, quotes
    if len(brackets) > 2 * MAX_CONTAINERS:
        raise TraceFormatError(f"trace holds more than {MAX_CONTAINERS:,} JSON objects and arrays")
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    raise TraceFormatError(f"trace is nested more than {MAX_DEPTH} levels deep")
        else:
            depth -= 1


def _reject_constant(name):
    raise ValueError(f"{name} is not allowed in a trace")


def _finite(value):
    """JSON has no NaN/inf: -inf logprobs become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class _Where(ValueError):
    """A shape error and the place it was found, outermost first: step 3, candidate 2, text."""

    def __init__(self, places: list, reason: str):
        super().__init__(reason)
        self.places, self.reason = places, reason

    def __str__(self) -> str:
        return ", ".join(self.places) + ": " + self.reason


def _reason(exc: Exception) -> str:
    if isinstance(exc, _Where):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"the field {exc.args[0]!r} is missing"
    return str(exc)


def _located(place: str, exc: Exception) -> _Where:
    if isinstance(exc, _Where):
        return _Where([place, *exc.places], exc.reason)
    return _Where([place], _reason(exc))


_REQUIRED = object()


def _field(d, key: str, read, default=_REQUIRED):
    """read(d[key]), naming the field in any error; `default` (a JSON value) when the field is absent."""
    if not isinstance(d, dict):
        raise TypeError(f"expected an object, got {_kind(d)}")
    if key not in d:
        if default is _REQUIRED:
            raise KeyError(key)
        value = default
    else:
        value = d[key]
    try:
        return read(value)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _located(key, exc) from None


def _each(d, key: str, read, label: str | None = None, default=_REQUIRED) -> list:
    """[read(x) for x in d[key]], naming the item in any error: 'candidate 3' (label given; counted from 1,
    as pages count) or 'chosen_ids[2]' (the file's own index)."""
    def items(values):
        out = []
        for i, value in enumerate(_list(values)):
            try:
                out.append(read(value))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise _located(f"{label} {i + 1}" if label else f"{key}[{i}]", exc) from None
        return out

    try:
        return _field(d, key, items, default)
    except _Where as exc:           # the item names itself; the list's key would only repeat it
        if exc.places[0] == key and len(exc.places) > 1:
            raise _Where(exc.places[1:], exc.reason) from None
        raise


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def _num(value) -> float:
    """A finite number; null stands for -inf (a cut token's logprob)."""
    if value is None:
        return float("-inf")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {_kind(value)}")
    try:
        value = float(value)
    except OverflowError:           # a whole number of 400 digits
        raise ValueError("expected a finite number, got a whole number too large for one") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    return value


MAX_WHOLE = 2**63 - 1           # a 64-bit integer: a seed may be this big, and tables and floats take it


def _int(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number, got {_short(value)}")
    if abs(value) > MAX_WHOLE:      # 10**400 would overflow where a page turns it into a float or a size
        raise ValueError(f"expected a whole number up to {MAX_WHOLE:,}, got one with {len(str(abs(value)))} digits")
    return value


def _bool(value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {_short(value)}")
    return value


def _str(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {_kind(value)}")
    _utf8(value)
    return value


def _utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:      # a lone surrogate (\\ud800) parses, but cannot be shown or saved
        raise ValueError("text holds an unpaired surrogate, which is not a character") from None


def _short(value) -> str:
    text = repr(value) if not isinstance(value, dict | list) else _kind(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _list(value) -> list:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {_kind(value)}")
    return value


def _candidate(d) -> Candidate:
    return Candidate(token_id=_field(d, "token_id", _int), text=_field(d, "text", _str),
                     logit=_field(d, "logit", _num), prob=_field(d, "prob", _num),
                     logprob=_field(d, "logprob", _num), rank=_field(d, "rank", _int),
                     shaped_prob=_field(d, "shaped_prob", _num), kept=_field(d, "kept", _bool))


def _neighbour(d) -> Neighbour:
    return Neighbour(token_id=_field(d, "token_id", _int), text=_field(d, "text", _str), value=_field(d, "value", _num))


def _feedback(d) -> FeedBack | None:
    if d is None:
        return None
    return FeedBack(nearest=_each(d, "nearest", _neighbour, "nearest"),
                    nearest_cosine=_field(d, "nearest_cosine", _num),
                    weights=_each(d, "weights", _neighbour, "weight"), argmax_id=_field(d, "argmax_id", _int),
                    argmax_text=_field(d, "argmax_text", _str), entropy=_field(d, "entropy", _num),
                    norm=_field(d, "norm", _num), nearest_norm=_field(d, "nearest_norm", _num))


def _kv(d) -> KVStep | None:
    if d is None:
        return None
    return KVStep(rows=_field(d, "rows", _int), bytes=_field(d, "bytes", _int),
                  rows_appended=_field(d, "rows_appended", _int), rows_copied=_field(d, "rows_copied", _int),
                  paged_rows=_field(d, "paged_rows", _int), paged_blocks=_field(d, "paged_blocks", _int),
                  paged_bytes=_field(d, "paged_bytes", _int), beam_rows=_each(d, "beam_rows", _int))


def _stage_token(d) -> StageToken:
    return StageToken(token_id=_field(d, "token_id", _int), text=_field(d, "text", _str),
                      prob=_field(d, "prob", _num))


def _stage(d) -> Stage:
    return Stage(name=_field(d, "name", _str), value=_field(d, "value", _num),
                 kept_count=_field(d, "kept_count", _int), cut_count=_field(d, "cut_count", _int),
                 removed_mass=_field(d, "removed_mass", _num), probs=_each(d, "probs", _num),
                 top_id=_field(d, "top_id", _int), top_text=_field(d, "top_text", _str),
                 top_prob=_field(d, "top_prob", _num), cut=_each(d, "cut", _stage_token, "cut token", default=[]))


def _step(d) -> Step:
    return Step(index=_field(d, "index", _int), candidates=_each(d, "candidates", _candidate, "candidate"),
                entropy=_field(d, "entropy", _num), shaped_entropy=_field(d, "shaped_entropy", _num),
                removed_mass=_field(d, "removed_mass", _num), kept_count=_field(d, "kept_count", _int),
                chosen_ids=_each(d, "chosen_ids", _int),
                chosen_texts=_each(d, "chosen_texts", _str),
                feedback=_field(d, "feedback", _feedback, None), kv=_field(d, "kv", _kv, None),
                beam_node_ids=_each(d, "beam_node_ids", _int, default=[]),
                seconds=_field(d, "seconds", _num, 0.0),
                stages=_each(d, "stages", _stage, "stage", default=[]))


def _node(d) -> Node:
    return Node(id=_field(d, "id", _int), parent=_field(d, "parent", _optional_int), step=_field(d, "step", _int),
                token_id=_field(d, "token_id", _int), text=_field(d, "text", _str),
                logprob=_field(d, "logprob", _num), cum_logprob=_field(d, "cum_logprob", _num),
                score=_field(d, "score", _num), length=_field(d, "length", _int),
                status=_field(d, "status", _str), beam=_field(d, "beam", _int), rank=_field(d, "rank", _int))


def _sequence(d) -> Sequence:
    return Sequence(token_ids=_each(d, "token_ids", _int), text=_field(d, "text", _str),
                    cum_logprob=_field(d, "cum_logprob", _num), score=_field(d, "score", _num),
                    node_id=_field(d, "node_id", _optional_int, None))


def _optional_int(value) -> int | None:
    return None if value is None else _int(value)


def _plain_dict(value) -> dict:
    """A free-form object (facts, versions, timings, findings): any JSON whose numbers are finite
    and whose text is real Unicode, so it can be shown and saved again."""
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {_kind(value)}")
    stack = [("", value)]
    while stack:                     # nesting is bounded by MAX_DEPTH before parsing
        place, item = stack.pop()
        try:
            if isinstance(item, dict):
                for key, inner in item.items():
                    _utf8(key)
                    stack.append((f"{place}.{key}" if place else key, inner))
            elif isinstance(item, list):
                stack.extend((f"{place}[{i}]", inner) for i, inner in enumerate(item))
            elif isinstance(item, str):
                _utf8(item)
            elif isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"expected finite numbers, got {item}")
            elif isinstance(item, int) and not isinstance(item, bool):
                _int(item)
        except ValueError as exc:
            raise ValueError(f"{place[:60]}: {exc}" if place else str(exc)) from None
    return value


def _forced(value) -> dict:
    out = {}
    for key, token_id in _plain_dict(value).items():
        try:
            step = int(key)
        except ValueError:
            raise ValueError(f"a forced step must be a whole number, got {_short(key)}") from None
        out[step] = _field(value, key, _int)
    return out


def _build_trace(d: dict) -> Trace:
    # replaying the config must not fail later
    config = _field(d, "config", lambda c: DecodeConfig.from_dict(_plain_dict(c)).validate())
    return Trace(model=_field(d, "model", _str), prompt=_field(d, "prompt", _str),
                 prompt_token_ids=_each(d, "prompt_token_ids", _int), config=config,
                 steps=_each(d, "steps", _step, "step"), sequences=_each(d, "sequences", _sequence, "sequence"),
                 nodes=_each(d, "nodes", _node, default=[]),      # 'nodes[3]': a node's own name is its id
                 model_facts=_field(d, "model_facts", _plain_dict, {}),
                 versions=_field(d, "versions", _plain_dict, {}), timings=_field(d, "timings", _plain_dict, {}),
                 forced=_field(d, "forced", _forced, {}), findings=_field(d, "findings", _plain_dict, {}),
                 schema=_field(d, "schema", _str))
