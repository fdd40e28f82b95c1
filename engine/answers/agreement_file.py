"""The run file's `agreement` part: written from an Agreement, read back as its settings.

Written: per utility name, each candidate (`token_ids`, `text`, `logprob`, `lower`, `upper`, `estimate`,
`stderr`), `winner` (an index into `candidates`), `certified`, `margin`, and `limit` (the candidates asked for).
Read: the part is checked whole and bounded like every other field of a file, but only its settings (which
utilities, how many candidates) are kept: every number is worked out again from the run's answers, so a file
cannot claim a winner its answers do not give.
"""
from __future__ import annotations

import math

from ..config import MAX_ANSWER_DEPTH
from ..trace.reader import _each, _field, _int, _num, _str
from .agreement import MAX_CANDIDATES, UTILITIES, Agreement, AgreementSettings

MAX_TEXT = 64_000           # characters of a candidate's text (as the run's own answers)


def to_dict(agreement: Agreement) -> dict:
    out = {}
    for name in agreement.utilities:
        r = agreement.results.get(name)
        rows = []
        for i, a in enumerate(agreement.candidates):
            rows.append({"token_ids": list(a.token_ids), "text": a.text, "logprob": a.logprob,
                         "lower": r.lower[i], "upper": r.upper[i],
                         "estimate": _finite(r.estimate[i]) if r.estimate else None,
                         "stderr": _finite(r.stderr[i]) if r.stderr else None})
        out[name] = {"limit": agreement.limit, "candidates": rows,
                     "winner": r.winner if r else None, "certified": bool(r and r.certified),
                     "margin": r.margin if r else None, "sample_winner": r.sample_winner if r else None}
    return out


def _finite(x: float):
    return x if math.isfinite(x) else None


def read(value) -> AgreementSettings:
    """The part, every field checked; its settings."""
    if not isinstance(value, dict):
        raise TypeError("agreement: expected an object of utilities")
    names = list(value)
    if not names or len(names) > len(UTILITIES):
        raise ValueError(f"agreement: give 1 to {len(UTILITIES)} utilities")
    limits = set()
    for name in names:
        if name not in UTILITIES:
            raise ValueError(f"agreement: '{str(name)[:40]}' is not one of {', '.join(UTILITIES)}")
        limits.add(_field(value, name, _part))
    if len(limits) != 1:
        raise ValueError("agreement: its utilities were computed with different numbers of candidates")
    return AgreementSettings(tuple(names), limits.pop())


def _part(v) -> int:
    limit = _field(v, "limit", _int)
    if not 1 <= limit <= MAX_CANDIDATES:
        raise ValueError(f"limit: expected 1 to {MAX_CANDIDATES}, got {limit:,}")
    if not isinstance(v.get("candidates"), list) or len(v["candidates"]) > limit:
        raise ValueError(f"candidates: expected a list of at most {limit} (its limit)")
    rows = _each(v, "candidates", _candidate, "candidate")
    winner = _field(v, "winner", _optional_int)
    if (winner is None) != (not rows) or winner is not None and not 0 <= winner < len(rows):
        raise ValueError("winner: not the index of one of its candidates")
    sample_winner = _field(v, "sample_winner", _optional_int, default=None)
    if sample_winner is not None and not 0 <= sample_winner < len(rows):
        raise ValueError("sample_winner: not the index of one of its candidates")
    if not isinstance(v.get("certified"), bool):
        raise TypeError("certified: expected true or false")
    margin = _field(v, "margin", lambda x: None if x is None else _num(x))
    if margin is not None and not -1 - 1e-9 <= margin <= 1 + 1e-9:
        raise ValueError(f"margin: expected a number from -1 to 1, got {margin:g}")
    return limit


def _candidate(v) -> None:
    ids = _field(v, "token_ids", lambda x: x)
    if not isinstance(ids, list) or len(ids) > MAX_ANSWER_DEPTH or any(_int(t) < 0 for t in ids):
        raise ValueError(f"token_ids: expected at most {MAX_ANSWER_DEPTH} token ids, each at least 0")
    text = _field(v, "text", _str)
    if len(text) > MAX_TEXT:
        raise ValueError(f"text: {len(text):,} characters, more than {MAX_TEXT:,}")
    if _field(v, "logprob", _num) > 1e-9:
        raise ValueError("logprob: a log-probability must be at most 0")
    lower, upper = _field(v, "lower", _share), _field(v, "upper", _share)
    if lower > upper + 1e-9:
        raise ValueError("lower: more than its upper bound")
    _field(v, "estimate", lambda x: None if x is None else _share(x))
    _field(v, "stderr", lambda x: None if x is None else _share(x))


def _share(v) -> float:
    x = _num(v)
    if not -1e-9 <= x <= 1 + 1e-9:
        raise ValueError(f"expected a number from 0 to 1, got {x:g}")
    return x


def _optional_int(v):
    return None if v is None else _int(v)
