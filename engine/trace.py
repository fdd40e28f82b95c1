"""Trace: the record of one decode, as plain Python values, with JSON in and out.

A trace holds everything a figure needs (candidates per step, the beam tree, the
fed-back vectors' nearest words, the KV cache per step), so it can be shown, shared
and replayed without the model. Records are frozen dataclasses of plain values.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

from .config import DecodeConfig
from .errors import ConfigError, TraceFormatError

SCHEMA = "decodescope.trace/1"
MAX_TRACE_BYTES = 20 * 1024 * 1024


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
        if isinstance(text, bytes | bytearray):
            if len(text) > MAX_TRACE_BYTES:
                raise TraceFormatError(f"trace is {len(text) / 1e6:.1f} MB; the limit is {MAX_TRACE_BYTES // 2**20} MB")
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise TraceFormatError("trace is not UTF-8 text; expected a DecodeScope JSON trace") from None
        if len(text.encode("utf-8", "surrogatepass")) > MAX_TRACE_BYTES:
            raise TraceFormatError(f"trace is larger than the {MAX_TRACE_BYTES // 2**20} MB limit")
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
            raise TraceFormatError(f"unreadable schema '{schema}'") from None
        if version > 1:
            raise TraceFormatError(f"trace schema '{schema}' is newer than this DecodeScope reads ({SCHEMA}); update DecodeScope")
        try:
            return _build_trace(data)
        except ConfigError as exc:
            raise TraceFormatError(f"trace config is invalid: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TraceFormatError(f"trace has the wrong shape ({type(exc).__name__}: {exc})") from None


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


def _num(value) -> float:
    if value is None:
        return float("-inf")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _int(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _str(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _list(value) -> list:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _candidate(d) -> Candidate:
    return Candidate(token_id=_int(d["token_id"]), text=_str(d["text"]), logit=_num(d["logit"]),
                     prob=_num(d["prob"]), logprob=_num(d["logprob"]), rank=_int(d["rank"]),
                     shaped_prob=_num(d["shaped_prob"]), kept=bool(d["kept"]))


def _neighbour(d) -> Neighbour:
    return Neighbour(token_id=_int(d["token_id"]), text=_str(d["text"]), value=_num(d["value"]))


def _feedback(d) -> FeedBack | None:
    if d is None:
        return None
    return FeedBack(nearest=[_neighbour(x) for x in _list(d["nearest"])], nearest_cosine=_num(d["nearest_cosine"]),
                    weights=[_neighbour(x) for x in _list(d["weights"])], argmax_id=_int(d["argmax_id"]),
                    argmax_text=_str(d["argmax_text"]), entropy=_num(d["entropy"]), norm=_num(d["norm"]),
                    nearest_norm=_num(d["nearest_norm"]))


def _kv(d) -> KVStep | None:
    if d is None:
        return None
    return KVStep(rows=_int(d["rows"]), bytes=_int(d["bytes"]), rows_appended=_int(d["rows_appended"]),
                  rows_copied=_int(d["rows_copied"]), paged_rows=_int(d["paged_rows"]),
                  paged_blocks=_int(d["paged_blocks"]), paged_bytes=_int(d["paged_bytes"]),
                  beam_rows=[_int(x) for x in _list(d["beam_rows"])])


def _stage_token(d) -> StageToken:
    return StageToken(token_id=_int(d["token_id"]), text=_str(d["text"]), prob=_num(d["prob"]))


def _stage(d) -> Stage:
    return Stage(name=_str(d["name"]), value=_num(d["value"]), kept_count=_int(d["kept_count"]),
                 cut_count=_int(d["cut_count"]), removed_mass=_num(d["removed_mass"]),
                 probs=[_num(x) for x in _list(d["probs"])], top_id=_int(d["top_id"]), top_text=_str(d["top_text"]),
                 top_prob=_num(d["top_prob"]), cut=[_stage_token(x) for x in _list(d.get("cut", []))])


def _step(d) -> Step:
    return Step(index=_int(d["index"]), candidates=[_candidate(c) for c in _list(d["candidates"])],
                entropy=_num(d["entropy"]), shaped_entropy=_num(d["shaped_entropy"]),
                removed_mass=_num(d["removed_mass"]), kept_count=_int(d["kept_count"]),
                chosen_ids=[_int(x) for x in _list(d["chosen_ids"])],
                chosen_texts=[_str(x) for x in _list(d["chosen_texts"])],
                feedback=_feedback(d.get("feedback")), kv=_kv(d.get("kv")),
                beam_node_ids=[_int(x) for x in _list(d.get("beam_node_ids", []))],
                seconds=_num(d.get("seconds", 0.0)),
                stages=[_stage(x) for x in _list(d.get("stages", []))])


def _node(d) -> Node:
    parent = d["parent"]
    return Node(id=_int(d["id"]), parent=None if parent is None else _int(parent), step=_int(d["step"]),
                token_id=_int(d["token_id"]), text=_str(d["text"]), logprob=_num(d["logprob"]),
                cum_logprob=_num(d["cum_logprob"]), score=_num(d["score"]), length=_int(d["length"]),
                status=_str(d["status"]), beam=_int(d["beam"]), rank=_int(d["rank"]))


def _sequence(d) -> Sequence:
    node_id = d.get("node_id")
    return Sequence(token_ids=[_int(x) for x in _list(d["token_ids"])], text=_str(d["text"]),
                    cum_logprob=_num(d["cum_logprob"]), score=_num(d["score"]),
                    node_id=None if node_id is None else _int(node_id))


def _plain_dict(value) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _build_trace(d: dict) -> Trace:
    config = DecodeConfig.from_dict(_plain_dict(d["config"])).validate()   # replaying it must not fail later
    steps = [_step(s) for s in _list(d["steps"])]
    sequences = [_sequence(s) for s in _list(d["sequences"])]
    if not sequences:
        raise ValueError("a trace needs at least one sequence")
    return Trace(model=_str(d["model"]), prompt=_str(d["prompt"]),
                 prompt_token_ids=[_int(x) for x in _list(d["prompt_token_ids"])], config=config,
                 steps=steps, sequences=sequences, nodes=[_node(n) for n in _list(d.get("nodes", []))],
                 model_facts=_plain_dict(d.get("model_facts", {})), versions=_plain_dict(d.get("versions", {})),
                 timings=_plain_dict(d.get("timings", {})),
                 forced={int(k): _int(v) for k, v in _plain_dict(d.get("forced", {})).items()},
                 findings=_plain_dict(d.get("findings", {})), schema=_str(d["schema"]))
