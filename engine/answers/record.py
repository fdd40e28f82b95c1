"""A whole-answers run as JSON, and read back with every field checked.

The file carries what was measured (each node's split of its mass, each answer's log-probability, the
samples' counts); what follows from it (the ledger, the certificate, ranks, depths, token paths) is worked
out again on reading, so a file cannot claim a ledger its nodes do not add up to. Every count is bounded by
the settings' own limits before anything is built from it.
"""
from __future__ import annotations

import json
import math

from ..errors import ConfigError, TraceFormatError
from ..trace.reader import _each, _field, _int, _name, _num, _str, read_json, reason
from .distribution import Distribution
from .landed import Landing
from .run import AnswersRun
from .samples import MAX_SAMPLES, Outcome, SampleSummary
from .stops import MAX_STOPS, check_stops
from .tree import MAX_BRANCH, MAX_BUDGET, Answer, AnswerTree, Prefix, TreeSettings

FORMAT = "decodescope.answers/1"
MAX_NODES = MAX_BUDGET * MAX_BRANCH + 1
MAX_PROMPT_TOKENS = 200_000
MAX_TOKEN_CHARS = 1_000          # of one token's text (real ones hold a few dozen)
MAX_ANSWER_CHARS = 64_000        # of an answer's text


def to_dict(run: AnswersRun) -> dict:
    tree, s = run.tree, run.tree.settings
    d = s.distribution
    out = {
        "schema": FORMAT, "model": run.model, "prompt": run.prompt, "chat": run.chat, "seed": run.seed,
        "prompt_token_ids": list(tree.prompt_ids),
        "settings": {"depth": s.depth, "budget": s.budget, "branch": s.branch, "batch": s.batch,
                     "distribution": {"kind": d.kind, "temperature": d.temperature, "top_k": d.top_k,
                                      "top_p": d.top_p, "min_p": d.min_p,
                                      "repetition_penalty": d.repetition_penalty},
                     "stops": list(s.stops)},
        "nodes": [[n.parent, n.token_id, n.text, _finite(n.logprob), n.expanded, n.end_prob, n.left_out, n.cut,
                   n.best_left_out, _finite(n.entropy), _finite(n.varentropy)] for n in tree.nodes],
        "answers": [[a.node_id, a.logprob, a.text] + ([True] if a.stop else []) for a in tree.answers],
        "expansions": tree.expansions, "passes": tree.passes, "seconds": tree.seconds, "stopped": tree.stopped,
        "landings": [[x.strategy, list(x.token_ids), x.text, x.complete, x.logprob] for x in run.landings],
    }
    if run.samples is not None:
        out["samples"] = {"n": run.samples.samples, "seed": run.samples.seed,
                          "outcomes": [[list(o.token_ids), o.text, o.complete, o.logprob, o.count]
                                       for o in run.samples.outcomes]}
    return out


def to_json(run: AnswersRun) -> str:
    return json.dumps(to_dict(run), ensure_ascii=False, allow_nan=False)


def from_json(text) -> AnswersRun:
    """Read a file: size, nesting, JSON, then every field; TraceFormatError names the first problem."""
    data = read_json(text, "the file", "a DecodeScope answers file")
    if not isinstance(data, dict) or data.get("schema") != FORMAT:
        raise TraceFormatError(f"not a DecodeScope answers file: its 'schema' field is not '{FORMAT}'")
    try:
        return _run(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TraceFormatError(f"answers file: {reason(exc)}") from None


def _run(d: dict) -> AnswersRun:
    settings = _field(d, "settings", _settings)
    prompt_ids = _field(d, "prompt_token_ids", lambda v: _bounded_ints(v, MAX_PROMPT_TOKENS, "prompt tokens"))
    raw_nodes = _field(d, "nodes", lambda v: _bounded_list(v, MAX_NODES, "nodes"))
    nodes = _nodes(raw_nodes, settings)
    paths = _paths(nodes)
    answers = _each(d, "answers", lambda a: _answer(a, nodes, paths), "answer")
    if len({(a.node_id, a.text) for a in answers}) != len(answers):
        raise ValueError("answers: two answers with one text end after the same node")
    if not settings.stops and (any(a.stop for a in answers) or len({a.node_id for a in answers}) != len(answers)):
        raise ValueError("answers: without stop strings, one answer ends after a node, at an end token")
    answers.sort(key=lambda a: -a.logprob)
    tree = AnswerTree(prompt_ids=tuple(prompt_ids), settings=settings, nodes=tuple(nodes), answers=tuple(answers),
                      expansions=_field(d, "expansions", _count(MAX_BUDGET)),
                      passes=_field(d, "passes", _count(MAX_BUDGET + MAX_SAMPLES * 70)),
                      seconds=_field(d, "seconds", _nonneg), stopped=_field(d, "stopped", _boolean))
    total = tree.ledger.total
    if not math.isclose(total, 1.0, abs_tol=1e-4):
        raise ValueError(f"nodes: their masses add up to {total:.6f}, not 1")
    landings = _each(d, "landings", lambda x: _landing(x, tree), "landing", default=[])
    samples = _field(d, "samples", _samples, default=None)
    sampled = ()
    if samples is not None:
        from .run import _rank_sample

        sampled = tuple(_rank_sample(tree, o) for o in samples.outcomes if o.complete)
    return AnswersRun(model=_field(d, "model", _name), prompt=_field(d, "prompt", _str),
                      chat=_field(d, "chat", _boolean), tree=tree, landings=tuple(landings), samples=samples,
                      sample_landings=sampled, seed=_field(d, "seed", _int))


def _settings(v) -> TreeSettings:
    dist = _field(v, "distribution", lambda x: Distribution(
        kind=_field(x, "kind", _str), temperature=_field(x, "temperature", _num), top_k=_field(x, "top_k", _int),
        top_p=_field(x, "top_p", _num), min_p=_field(x, "min_p", _num),
        repetition_penalty=_field(x, "repetition_penalty", _num)))
    return TreeSettings(depth=_field(v, "depth", _int), budget=_field(v, "budget", _int),
                        branch=_field(v, "branch", _int), batch=_field(v, "batch", _int), distribution=dist,
                        stops=_field(v, "stops", _stops, default=[])).check()


def _nodes(raw: list, settings: TreeSettings) -> list:
    """Each node [parent, token, text, logprob, expanded, end_prob, left_out, cut, best_left_out, H, V]; a
    parent comes before its child, a child's mass is at most its parent's, depths stay within the setting."""
    nodes = []
    for i, row in enumerate(raw):
        try:
            if not isinstance(row, list) or len(row) != 11:
                raise ValueError("expected a list of 11 values")
            parent, token = _int(row[0]), _int(row[1])
            if i == 0:
                if parent != -1:
                    raise ValueError("the root's parent must be -1")
                depth = 0
            else:
                if not 0 <= parent < i or not nodes[parent].expanded:
                    raise ValueError(f"parent {parent} is not an expanded node before it")
                depth = nodes[parent].depth + 1
                if depth > settings.depth:
                    raise ValueError(f"depth {depth} is past the setting {settings.depth}")
            logprob = _logprob(row[3])
            if i and logprob > nodes[parent].logprob + 1e-9:
                raise ValueError("its mass is more than its parent's")
            shares = [_share(x) for x in row[5:9]]
            nodes.append(Prefix(id=i, parent=parent, token_id=token, text=_text(row[2], MAX_TOKEN_CHARS), depth=depth,
                                logprob=logprob if i else 0.0, expanded=_boolean(row[4]), end_prob=shares[0],
                                left_out=shares[1], cut=shares[2], best_left_out=shares[3],
                                entropy=_optional(row[9]), varentropy=_optional(row[10])))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"node {i}: {reason(exc)}") from None
    if not nodes:
        raise ValueError("nodes: the tree has no root")
    expanded = sum(1 for n in nodes if n.expanded)
    if expanded > settings.budget:
        raise ValueError(f"nodes: {expanded:,} expanded, more than the budget of {settings.budget:,}")
    if len(nodes) > expanded * settings.branch + 1:
        raise ValueError(f"nodes: {len(nodes):,} of them, more than {expanded:,} expanded with "
                         f"{settings.branch} children each allow")
    return nodes


def _paths(nodes: list) -> list:
    paths = [()]
    for n in nodes[1:]:
        paths.append(paths[n.parent] + (n.token_id,))
    return paths


def _answer(v, nodes, paths) -> Answer:
    if not isinstance(v, list) or len(v) not in (3, 4):
        raise ValueError("expected [node, logprob, text] or [node, logprob, text, stopped]")
    node = _int(v[0])
    if not 0 <= node < len(nodes) or not nodes[node].expanded:
        raise ValueError(f"node {node} is not an expanded node of the tree")
    logprob = _logprob(v[1])
    if logprob > nodes[node].logprob + 1e-9:
        raise ValueError("its probability is more than its prefix's mass")
    return Answer(node, paths[node], _text(v[2], MAX_ANSWER_CHARS), logprob, _boolean(v[3]) if len(v) == 4 else False)


def _landing(v, tree: AnswerTree) -> Landing:
    if not isinstance(v, list) or len(v) != 5:
        raise ValueError("expected [strategy, token ids, text, complete, logprob]")
    ids = tuple(_bounded_ints(v[1], 64, "tokens"))
    complete, logprob = _boolean(v[3]), _logprob(v[4])
    text = _text(v[2], MAX_ANSWER_CHARS)
    found = complete and any(a.key == (ids, text) for a in tree.answers)
    return Landing(_name(v[0])[:40], ids, text, complete, logprob,
                   tree.rank_of(logprob) if complete else 0, found, complete and tree.beyond_reach(logprob))


def _samples(v) -> SampleSummary:
    n = _field(v, "n", _count(MAX_SAMPLES))
    outcomes = _each(v, "outcomes", _outcome, "outcome")
    if sum(o.count for o in outcomes) != n:
        raise ValueError(f"samples: the outcomes' counts do not add up to {n}")
    from .samples import summarise_outcomes

    return summarise_outcomes(outcomes, n, _field(v, "seed", _int))


def _outcome(v) -> Outcome:
    if not isinstance(v, list) or len(v) != 5:
        raise ValueError("expected [token ids, text, complete, logprob, count]")
    return Outcome(tuple(_bounded_ints(v[0], 64, "tokens")), _text(v[1], MAX_ANSWER_CHARS), _boolean(v[2]),
                   _logprob(v[3]),
                   _count(MAX_SAMPLES)(v[4]))


# ---- values -------------------------------------------------------------------------------------------
def _text(v, limit: int) -> str:
    text = _str(v)
    if len(text) > limit:
        raise ValueError(f"a text of {len(text):,} characters, more than {limit:,}")
    return text


def _stops(v) -> tuple:
    """The stop strings: a list of at most MAX_STOPS texts, each checked as the settings check them."""
    if not isinstance(v, list):
        raise TypeError("stops: expected a list of texts")
    if len(v) > MAX_STOPS:
        raise ValueError(f"stops: {len(v):,} of them, more than {MAX_STOPS}")
    try:
        return check_stops([_str(x) for x in v])
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def _finite(x: float):
    return x if math.isfinite(x) else None


def _logprob(v) -> float:
    x = _num(v)
    if x > 1e-9:
        raise ValueError(f"a log-probability must be at most 0, got {x:g}")
    return min(x, 0.0)


def _share(v) -> float:
    x = _num(v)
    if not 0 <= x <= 1 + 1e-9:
        raise ValueError(f"a probability must be between 0 and 1, got {x:g}")
    return min(x, 1.0)


def _optional(v) -> float:
    return math.nan if v is None else _num(v)


def _nonneg(v) -> float:
    x = _num(v)
    if x < 0:
        raise ValueError(f"expected a number at least 0, got {x:g}")
    return x


def _boolean(v) -> bool:
    if not isinstance(v, bool):
        raise TypeError("expected true or false")
    return v


def _count(top: int):
    def read(v) -> int:
        x = _int(v)
        if not 0 <= x <= top:
            raise ValueError(f"expected a count from 0 to {top:,}, got {x:,}")
        return x
    return read


def _bounded_list(v, top: int, what: str) -> list:
    if not isinstance(v, list):
        raise TypeError(f"{what}: expected a list")
    if len(v) > top:
        raise ValueError(f"{what}: {len(v):,} of them, more than {top:,}")
    return v


def _bounded_ints(v, top: int, what: str) -> list:
    values = [_int(x) for x in _bounded_list(v, top, what)]
    if any(x < 0 for x in values):
        raise ValueError(f"{what}: a token id below 0")
    return values
