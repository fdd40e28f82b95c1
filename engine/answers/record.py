"""A whole-answers run as JSON, and read back with every field checked.

The file carries what was measured (each node's split of its mass, each answer's log-probability, the
samples' counts); what follows from it (the ledger, the certificate, ranks, depths, token paths) is worked
out again on reading, so a file cannot claim a ledger its nodes do not add up to, and each node's own split
is checked (consistency.py). Every count is bounded by the settings' own limits before anything is built from
it: nodes by the budget and branch, landings by greedy and the beam widths a run may place, sample outcomes by
the samples drawn.

What is written is bounded too, so that every run the app or the CLI makes opens again within the reader's
20 MB: a prefix the budget left unexpanded (most of a large tree) is written as [parent, token, text, logprob]
alone, the rest of its row being 0 by definition. A run at the CLI's maxima (budget 5,000 x branch 64 =
320,001 nodes) is then about 14 MB instead of 26 MB.
JSON has no -inf: a landing's log-probability is null when the answer has probability 0 under the run's
distribution (a sampler's top-k or top-p cut one of its tokens, while greedy and beam search, which read the
model's own scores, still chose it).
"""
from __future__ import annotations

import json
import math
import re

from ..config import MAX_BEAMS, seed_problem
from ..errors import ConfigError, TraceFormatError, quoted
from ..trace.reader import _each, _field, _int, _kind, _name, _num, _str, read_json, reason
from .consistency import check_nodes
from .distribution import Distribution
from .landed import Landing
from .run import MAX_SEED, AnswersRun
from .samples import MAX_SAMPLES, Outcome, SampleSummary
from .stops import MAX_STOPS, check_stops
from .tree import MAX_BRANCH, MAX_BUDGET, Answer, AnswerTree, Prefix, TreeSettings

FORMAT = "decodescope.answers/1"
MAX_NODES = MAX_BUDGET * MAX_BRANCH + 1
MAX_PROMPT_TOKENS = 200_000
MAX_TOKEN_CHARS = 1_000          # of one token's text (real ones hold a few dozen)
MAX_ANSWER_CHARS = 64_000        # of an answer's text
MAX_WIDTHS = 6                   # beam widths one run places (landed.parse_beams), greedy besides
_BEAM = re.compile(r"beam ([1-9][0-9]{0,2})")


def to_dict(run: AnswersRun, agreement=None) -> dict:
    """The run; with its agreement part when the run asks for one (`agreement`: that part already computed)."""
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
        "nodes": [_node_row(n) for n in tree.nodes],
        "answers": [[a.node_id, _finite(a.logprob), a.text] + ([True] if a.stop else []) for a in tree.answers],
        "expansions": tree.expansions, "passes": tree.passes, "seconds": tree.seconds, "stopped": tree.stopped,
        "landings": [[x.strategy, list(x.token_ids), x.text, x.complete, _finite(x.logprob)] for x in run.landings],
    }
    if run.samples is not None:
        out["samples"] = {"n": run.samples.samples, "seed": run.samples.seed,
                          "outcomes": [[list(o.token_ids), o.text, o.complete, _finite(o.logprob), o.count]
                                       for o in run.samples.outcomes]}
    if agreement is None and run.agreement is not None:
        from .agreement import agree

        agreement = agree(run, run.agreement.utilities, run.agreement.limit)
    if agreement is not None:
        from .agreement_file import to_dict as agreement_dict

        out["agreement"] = agreement_dict(agreement)
    return out


def _node_row(n: Prefix) -> list:
    """An expanded node's whole row; an open prefix's first four values (the rest is 0, nothing measured)."""
    if not n.expanded:
        return [n.parent, n.token_id, n.text, _finite(n.logprob)]
    return [n.parent, n.token_id, n.text, _finite(n.logprob), True, n.end_prob, n.left_out, n.cut,
            n.best_left_out, _finite(n.entropy), _finite(n.varentropy)]


def to_json(run: AnswersRun, agreement=None) -> str:
    """The run as JSON (with its agreement part when given); a probability of 0 (log -inf, a sampler's cut) is
    written as null."""
    return json.dumps(to_dict(run, agreement), ensure_ascii=False, allow_nan=False)


def to_checked_json(run: AnswersRun, name: str = "the run", agreement=None) -> str:
    """to_json, read back whole before anything is written: a file that would not open again (a model whose
    token texts are longer than a file may hold) is refused in one line, and the run printed stays."""
    text = to_json(run, agreement)
    try:
        from_json(text)
    except TraceFormatError as exc:
        raise ConfigError("json", f"{name}: not written, it would not open again ({exc})") from None
    return text


def from_json(text) -> AnswersRun:
    """Read a file: size, nesting, JSON, then every field; TraceFormatError names the first problem."""
    if isinstance(text, str) and not _encodes(text):
        raise TraceFormatError("the file holds an unpaired surrogate, which is not a character")
    data = read_json(text, "answers file", "a DecodeScope answers file")
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
    expanded = sum(1 for n in nodes if n.expanded)
    if settings.stops:                   # a prefix keeps up to `branch` answers, one per text its stops leave
        most = expanded * settings.branch
        _field(d, "answers", lambda v: _no_more(v, most, f"{settings.branch} per expanded node ({most:,})"))
    else:
        _field(d, "answers", lambda v: _no_more(v, expanded, f"one per expanded node ({expanded:,})"))
    answers = _each(d, "answers", lambda a: _answer(a, nodes), "answer")
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
    check_nodes(nodes, answers, settings, tree.expansions)
    _field(d, "landings", lambda v: _no_more(v, 1 + MAX_WIDTHS, f"greedy and {MAX_WIDTHS} beam widths"), default=[])
    landings = _each(d, "landings", lambda x: _landing(x, tree), "landing", default=[])
    names = [x.strategy for x in landings]
    if len(set(names)) != len(names):
        raise ValueError("landings: one strategy is placed twice")
    samples = _field(d, "samples", lambda v: None if v is None else _samples(v, settings.depth), default=None)
    sampled = ()
    if samples is not None:
        from .run import _rank_sample

        sampled = tuple(_rank_sample(tree, o) for o in samples.outcomes if o.complete)
    return AnswersRun(model=_field(d, "model", _name), prompt=_field(d, "prompt", _str),
                      chat=_field(d, "chat", _boolean), tree=tree, landings=tuple(landings), samples=samples,
                      sample_landings=sampled, seed=_field(d, "seed", _seed),
                      agreement=_field(d, "agreement", _agreement, default=None))


def _agreement(v):
    """The agreement part's settings, the part checked whole (agreement_file.py); absent in older files."""
    from .agreement_file import read

    return None if v is None else read(v)


def _settings(v) -> TreeSettings:
    dist = _field(v, "distribution", lambda x: Distribution(
        kind=_field(x, "kind", _str), temperature=_field(x, "temperature", _num), top_k=_field(x, "top_k", _int),
        top_p=_field(x, "top_p", _num), min_p=_field(x, "min_p", _num),
        repetition_penalty=_field(x, "repetition_penalty", _num)))
    return TreeSettings(depth=_field(v, "depth", _int), budget=_field(v, "budget", _int),
                        branch=_field(v, "branch", _int), batch=_field(v, "batch", _int), distribution=dist,
                        stops=_field(v, "stops", _stops, default=[])).check()


def _nodes(raw: list, settings: TreeSettings) -> list:
    """Each node [parent, token, text, logprob, expanded, end_prob, left_out, cut, best_left_out, H, V], or its
    first four values for a prefix not expanded; a parent comes before its child, a child's mass is at most
    its parent's, depths stay within the setting."""
    nodes: list = []
    for i, row in enumerate(raw):
        try:
            nodes.append(_node(i, row, nodes, settings))
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


def _node(i: int, row, nodes: list, settings: TreeSettings) -> Prefix:
    if not isinstance(row, list) or len(row) not in (4, 11):
        raise ValueError("expected a list of 11 values (or 4, for a prefix not expanded)")
    parent, token = _int(row[0]), _int(row[1])
    if i == 0:
        if parent != -1:
            raise ValueError("the root's parent must be -1")
        depth = 0
    else:
        if not 0 <= parent < i or not nodes[parent].expanded:
            raise ValueError(f"parent {parent} is not an expanded node before it")
        if token < 0:
            raise ValueError(f"token {token:,} is not a token id")
        depth = nodes[parent].depth + 1
        if depth > settings.depth:
            raise ValueError(f"depth {depth} is past the setting {settings.depth}")
    logprob = _logprob(row[3])
    if i == 0:
        logprob = 0.0                 # the root is the empty prefix: its mass is 1, whatever the file says
    elif logprob > nodes[parent].logprob + 1e-9:
        raise ValueError("its mass is more than its parent's")
    text = _text(row[2], MAX_TOKEN_CHARS)
    if len(row) == 4:
        return Prefix(id=i, parent=parent, token_id=token, text=text, depth=depth, logprob=logprob)
    end_prob, left_out, cut, best_left_out = (_share(x) for x in row[5:9])
    return Prefix(id=i, parent=parent, token_id=token, text=text, depth=depth, logprob=logprob,
                  expanded=_boolean(row[4]), end_prob=end_prob, left_out=left_out, cut=cut,
                  best_left_out=best_left_out, entropy=_optional(row[9]), varentropy=_optional(row[10]))


def _path(nodes: list, node_id: int) -> tuple:
    """The token ids from the root to a node (only answers need one: a path per node would copy the tree
    depth times over)."""
    out = []
    while node_id > 0:
        out.append(nodes[node_id].token_id)
        node_id = nodes[node_id].parent
    return tuple(out[::-1])


def _answer(v, nodes) -> Answer:
    if not isinstance(v, list) or len(v) not in (3, 4):
        raise ValueError("expected [node, logprob, text] or [node, logprob, text, stopped]")
    node = _int(v[0])
    if not 0 <= node < len(nodes) or not nodes[node].expanded:
        raise ValueError(f"node {node} is not an expanded node of the tree")
    logprob = _logprob(v[1])
    if logprob > nodes[node].logprob + 1e-9:
        raise ValueError("its probability is more than its prefix's mass")
    return Answer(node, _path(nodes, node), _text(v[2], MAX_ANSWER_CHARS), logprob,
                  _boolean(v[3]) if len(v) == 4 else False)


def _landing(v, tree: AnswerTree) -> Landing:
    if not isinstance(v, list) or len(v) != 5:
        raise ValueError("expected [strategy, token ids, text, complete, logprob]")
    strategy = _strategy(v[0])
    ids = tuple(_bounded_ints(v[1], tree.settings.depth, "tokens"))
    complete, logprob = _boolean(v[3]), -math.inf if v[4] is None else _logprob(v[4])     # null: probability 0
    text = _text(v[2], MAX_ANSWER_CHARS)
    same = tree.answer_for(ids, text) if complete else None
    if same is not None and not math.isclose(logprob, same.logprob, rel_tol=1e-9, abs_tol=1e-9):
        raise ValueError(f"its probability {math.exp(logprob):.6g} is not the tree's {same.prob:.6g} for the "
                         "same answer")
    return Landing(strategy, ids, text, complete, logprob,
                   tree.rank_of(logprob) if complete else 0, same is not None,
                   complete and tree.beyond_reach(logprob))


def _strategy(v) -> str:
    """'greedy' or 'beam W' (W from 2 to the widest beam): the names the app writes, nothing else (a name is
    shown on the page and a width is read from it)."""
    name = _str(v)
    width = _BEAM.fullmatch(name)
    if name != "greedy" and not (width and 2 <= int(width.group(1)) <= MAX_BEAMS):
        raise ValueError(f"strategy {quoted(name)} is not 'greedy' or 'beam W' with W from 2 to {MAX_BEAMS}")
    return name


def _samples(v, depth: int) -> SampleSummary:
    n = _field(v, "n", _count(MAX_SAMPLES))
    if n < 1:
        raise ValueError("n: a run with samples draws at least 1")
    _field(v, "outcomes", lambda x: _no_more(x, n, f"the {n} samples drawn"))
    outcomes = _each(v, "outcomes", lambda x: _outcome(x, n, depth), "outcome")
    if sum(o.count for o in outcomes) != n:
        raise ValueError(f"the outcomes' counts do not add up to {n}")
    if len({(o.token_ids, o.complete) for o in outcomes}) != len(outcomes):
        raise ValueError("one outcome is listed twice")
    from .samples import summarise_outcomes

    return summarise_outcomes(outcomes, n, _field(v, "seed", _seed))


def _outcome(v, n: int, depth: int) -> Outcome:
    if not isinstance(v, list) or len(v) != 5:
        raise ValueError("expected [token ids, text, complete, logprob, count]")
    count = _int(v[4])
    if not 1 <= count <= n:
        raise ValueError(f"a count from 1 to {n} (the samples drawn), got {count:,}")
    return Outcome(tuple(_bounded_ints(v[0], depth, "tokens")), _text(v[1], MAX_ANSWER_CHARS), _boolean(v[2]),
                   _logprob(v[3]), count)


def _seed(v) -> int:
    """The seed's own range (run.check_seed), so that a seed a run accepts is one its file keeps."""
    seed = _int(v)
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"must be a whole number from 0 to 2**63 - 1, got {seed:,}")
    return seed


# ---- values -------------------------------------------------------------------------------------------
def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(v, limit: int) -> str:
    """A text of at most `limit` characters. Every text of the file is UTF-8 already (from_json checks the
    whole file once: bytes decoded strictly, no \\ud800 escape alone, no lone surrogate in a str)."""
    if not isinstance(v, str):
        raise TypeError(f"expected text, got {_kind(v)}")
    text = v
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


def _seed(v) -> int:
    x = _int(v)
    if seed_problem(x):
        raise ValueError(seed_problem(x))
    return x


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


def _no_more(v, top: int, what: str) -> list:
    """A list of at most `top` items, counted before any is read."""
    if not isinstance(v, list):
        raise TypeError(f"expected a list, got {_kind(v)}")
    if len(v) > top:
        raise ValueError(f"{len(v):,} of them, more than {what}")
    return v


def _bounded_ints(v, top: int, what: str) -> list:
    values = [_int(x) for x in _bounded_list(v, top, what)]
    if any(x < 0 for x in values):
        raise ValueError(f"{what}: a token id below 0")
    return values
