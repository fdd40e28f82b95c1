"""Reading a trace file: limits on one file, JSON parsing, and each field read with its type checked.

The checks of what the values mean together (ids in the vocabulary, parents in the tree) are in check.py.
"""
from __future__ import annotations

import json
import math
import re

from ..config import DecodeConfig
from ..errors import ConfigError, TraceFormatError, quoted, shortened
from .records import (Candidate, DraftCheck, FedInput, FeedBack, GrammarStep, KVStep, Neighbour, Node, PairProb, Round,
                      Sequence, Stage, StageToken, Step)

MAX_TRACE_BYTES = 20_000_000       # 20 MB, decimal


# ---- limits on one file ------------------------------------------------------------
MAX_DEPTH = 20                  # a real trace nests 7 deep (findings -> sequences -> loop -> token_ids)
MAX_CONTAINERS = 500_000        # JSON objects and arrays; a 20 MB trace of real steps holds about 150,000
_ESCAPE = re.compile(r"\\.", re.DOTALL)       # each pattern repeats one character class only, so
_STRING = re.compile(r'"[^"]*"')                # the regex engine keeps no state per character
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def check_size(size: int, what: str = "trace") -> None:
    """Refuse a file over MAX_TRACE_BYTES, named as `what` (a trace, an answers file). A size that rounds to the
    limit is given in bytes: '20.0 MB; the limit is 20 MB' would read as no fault at all."""
    if size > MAX_TRACE_BYTES:
        shown = f"{size / 1e6:,.1f} MB"
        if shown == f"{MAX_TRACE_BYTES / 1e6:,.1f} MB":
            shown = f"{size:,} bytes, over {MAX_TRACE_BYTES:,}"
        raise TraceFormatError(f"{what} is {shown}; the limit is {MAX_TRACE_BYTES / 1e6:g} MB")


def brackets(text: str) -> str:
    """The [ ] { } of a JSON text that are not inside its strings: its shape, found without parsing it."""
    return _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text)))   # text may hold brackets, quotes


def nesting(shape: str, most: int) -> int:
    """How deep `shape` (from brackets()) nests, counted up to most + 1 (then it stops: deeper than allowed)."""
    depth = deepest = 0
    for char in shape:
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > most:
                    break
        else:
            depth -= 1
    return deepest


def check_structure(text: str, what: str = "trace") -> None:
    """Refuse deep nesting and floods of tiny containers before parsing: json.loads would
    recurse once per level (RecursionError) and spend ~60 bytes per empty [] or {}."""
    shape = brackets(text)
    if len(shape) > 2 * MAX_CONTAINERS:
        raise TraceFormatError(f"{what} holds more than {MAX_CONTAINERS:,} JSON objects and arrays")
    if nesting(shape, MAX_DEPTH) > MAX_DEPTH:
        raise TraceFormatError(f"{what} is nested more than {MAX_DEPTH} levels deep")


def reject_constant(name):
    raise ValueError(f"{name} is not allowed in a trace")


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def read_json(text: str | bytes, what: str = "trace", expected: str = "a DecodeScope JSON trace"):
    """The JSON value of a file (a trace, a saved answers run), read within the limits on one file: its size,
    UTF-8, nesting and containers before parsing, no NaN or Infinity, no lone surrogate anywhere. Raises
    TraceFormatError with one sentence; `what` names the file in it."""
    if isinstance(text, bytes | bytearray):
        check_size(len(text), what)
        try:
            text = text.decode("utf-8-sig")          # a byte order mark, as some editors save UTF-8, is not text
        except UnicodeDecodeError:
            raise TraceFormatError(f"{what} is not UTF-8 text; expected {expected}") from None
    else:
        check_size(len(text.encode("utf-8", "surrogatepass")), what)
        text = text.removeprefix("\ufeff")
    check_structure(text, what)
    try:
        data = json.loads(text, parse_constant=reject_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise TraceFormatError(f"{what} is not valid JSON ({shortened(str(exc), 120)})") from None
    if SURROGATE_ESCAPE.search(text):      # a \ud800 escape anywhere, even in a field nobody reads
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise TraceFormatError(f"{what} holds an unpaired surrogate (a \\ud800-style escape that is not "
                                   "half of a character); it is not text DecodeScope can show") from None
    return data


def finite(value):
    """JSON has no NaN/inf: -inf logprobs become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


class _Where(ValueError):
    """A shape error and the place it was found, outermost first: step 3, candidate 2, text."""

    def __init__(self, places: list, reason: str):
        super().__init__(reason)
        self.places, self.reason = places, reason

    def __str__(self) -> str:
        return ", ".join(self.places) + ": " + self.reason


def reason(exc: Exception) -> str:
    if isinstance(exc, _Where):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"the field {exc.args[0]!r} is missing"
    return str(exc)


def _located(place: str, exc: Exception) -> _Where:
    if isinstance(exc, _Where):
        return _Where([place, *exc.places], exc.reason)
    return _Where([place], reason(exc))


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


MAX_NAME = 1_000                 # characters of a model's name or address


def _name(value) -> str:
    text = _str(value)
    if len(text) > MAX_NAME:
        raise ValueError(f"a name of {len(text):,} characters, more than {MAX_NAME:,} ({quoted(text)})")
    return text


def _utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:      # a lone surrogate (\\ud800) parses, but cannot be shown or saved
        raise ValueError("text holds an unpaired surrogate, which is not a character") from None


def _short(value) -> str:
    return _kind(value) if isinstance(value, dict | list) else quoted(value)


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


def _fed(d) -> FedInput | None:
    if d is None:
        return None
    return FedInput(kind=_field(d, "kind", _str), nearest=_each(d, "nearest", _neighbour, "nearest"),
                    emitted_cosine=_field(d, "emitted_cosine", _num), norm=_field(d, "norm", _num),
                    emitted_norm=_field(d, "emitted_norm", _num),
                    participation=_field(d, "participation", _unknown_or_num),
                    entropy=_field(d, "entropy", _num), low_steps=_field(d, "low_steps", _int),
                    cold_stop=_field(d, "cold_stop", _bool), rule_seconds=_field(d, "rule_seconds", _num))


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
                 top_prob=_field(d, "top_prob", _num), cut=_each(d, "cut", _stage_token, "cut token", default=[]),
                 state=_field(d, "state", _stage_state, default={}))


MAX_STATE_KEYS = 4          # the most a stage records (config.STAGE_STATE_KEYS)


def _stage_state(value) -> dict:
    """A stage's state: an object of at most a few short names, each a finite number or true/false."""
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {_kind(value)}")
    if len(value) > MAX_STATE_KEYS:
        raise ValueError(f"a stage's state has at most {MAX_STATE_KEYS} entries, got {len(value):,}")
    out = {}
    for key, item in value.items():
        if len(key) > 20:
            raise ValueError(f"a state entry's name is at most 20 characters, got '{key[:20]}…'")
        if isinstance(item, bool):
            out[key] = item
        elif item is None:
            raise ValueError(f"state '{key}': expected a number or true/false, got null")
        else:
            out[key] = _num(item)
    return out


MAX_MASK_TEXT = 200_000        # a packed mask of 262,144 tokens is at most ~45,000 characters


def _mask_text(value) -> str:
    text = _str(value)
    if len(text) > MAX_MASK_TEXT:
        raise ValueError(f"the mask is {len(text):,} characters; at most {MAX_MASK_TEXT:,}")
    return text


def _grammar(d) -> GrammarStep | None:
    if d is None:
        return None
    return GrammarStep(allowed=_field(d, "allowed", _int), feasible_mass=_field(d, "feasible_mass", _num),
                       forced=_field(d, "forced", _bool), accepting=_field(d, "accepting", _bool),
                       removed=_each(d, "removed", _stage_token, "removed token"), mask=_field(d, "mask", _mask_text))


def _step(d) -> Step:
    return Step(index=_field(d, "index", _int), candidates=_each(d, "candidates", _candidate, "candidate"),
                entropy=_field(d, "entropy", _num), shaped_entropy=_field(d, "shaped_entropy", _num),
                removed_mass=_field(d, "removed_mass", _num), kept_count=_field(d, "kept_count", _int),
                chosen_ids=_each(d, "chosen_ids", _int),
                chosen_texts=_each(d, "chosen_texts", _str),
                feedback=_field(d, "feedback", _feedback, None), kv=_field(d, "kv", _kv, None),
                beam_node_ids=_each(d, "beam_node_ids", _int, default=[]),
                seconds=_field(d, "seconds", _num, 0.0),
                stages=_each(d, "stages", _stage, "stage", default=[]),
                grammar=_field(d, "grammar", _grammar, None),
                varentropy=_field(d, "varentropy", _unknown_or_num, None),
                fed_ids=_each(d, "fed_ids", _int, default=[]), fed_weights=_each(d, "fed_weights", _num, default=[]),
                emitted_id=_field(d, "emitted_id", _optional_int, None), fed=_field(d, "fed", _fed, None))


def _unknown_or_num(value) -> float:
    """A number, or null for one the trace does not know (NaN; not -inf as `_num` reads a null)."""
    return math.nan if value is None else _num(value)


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


def _optional_num(value) -> float | None:
    return None if value is None else _num(value)


def _pair(d) -> PairProb:
    return PairProb(token_id=_field(d, "token_id", _int), text=_field(d, "text", _str), p=_field(d, "p", _num),
                    q=_field(d, "q", _num))


def _draft_check(d) -> DraftCheck:
    return DraftCheck(token_id=_field(d, "token_id", _int), text=_field(d, "text", _str), q=_field(d, "q", _num),
                      p=_field(d, "p", _num), u=_field(d, "u", _optional_num), status=_field(d, "status", _str),
                      candidates=_each(d, "candidates", _pair, "candidate", default=[]),
                      residual=_each(d, "residual", _stage_token, "residual token", default=[]),
                      residual_mass=_field(d, "residual_mass", _num, 0.0))


def _round(d) -> Round:
    return Round(index=_field(d, "index", _int), first_step=_field(d, "first_step", _int),
                 drafts=_each(d, "drafts", _draft_check, "draft"), next_id=_field(d, "next_id", _optional_int),
                 next_text=_field(d, "next_text", _str), next_kind=_field(d, "next_kind", _str),
                 next_candidates=_each(d, "next_candidates", _pair, "next candidate", default=[]),
                 target_passes=_field(d, "target_passes", _int), draft_passes=_field(d, "draft_passes", _int),
                 seconds=_field(d, "seconds", _num, 0.0))


MAX_FREE_ITEMS = 100_000         # values in one free-form field; a 1,024-step sampled run's findings hold ~10,000
MAX_FREE_DEPTH = 10              # its nesting; findings nest 7 deep
MAX_FREE_TEXT = 10_000           # characters in one of its texts; a real fact or version is under 100


def _plain_dict(value) -> dict:
    """A free-form object (facts, versions, timings, findings): any JSON whose numbers are finite and whose
    text is real Unicode, so it can be shown and saved again; bounded in values, depth and text length, so
    no field costs more to check and keep than the steps themselves."""
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {_kind(value)}")
    stack = [("", value, 1)]
    seen = 0
    while stack:
        place, item, depth = stack.pop()
        seen += 1
        try:
            if seen > MAX_FREE_ITEMS:
                raise ValueError(f"holds more than {MAX_FREE_ITEMS:,} values")
            if depth > MAX_FREE_DEPTH and isinstance(item, dict | list):
                raise ValueError(f"is nested more than {MAX_FREE_DEPTH} levels deep")
            if isinstance(item, dict):
                for key, inner in item.items():
                    _text(key)
                    stack.append((f"{place}.{key[:40]}" if place else key[:40], inner, depth + 1))
            elif isinstance(item, list):
                stack.extend((f"{place}[{i}]", inner, depth + 1) for i, inner in enumerate(item))
            elif isinstance(item, str):
                _text(item)
            elif isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"expected finite numbers, got {item}")
            elif isinstance(item, int) and not isinstance(item, bool):
                _int(item)
        except ValueError as exc:
            raise ValueError(f"{place[:60]}: {exc}" if place else str(exc)) from None
    return value


def _text(text: str) -> None:
    """A text inside a free-form field: real Unicode, and not longer than a fact or a name can be."""
    _utf8(text)
    if len(text) > MAX_FREE_TEXT:
        raise ValueError(f"a text of {len(text):,} characters, more than {MAX_FREE_TEXT:,} ({quoted(text)})")


def _forced(value) -> dict:
    out = {}
    for key in _plain_dict(value):
        try:
            step = int(key)
        except ValueError:
            raise ValueError(f"a forced step must be a whole number, got {_short(key)}") from None
        out[step] = _field(value, key, _int)
    return out


def trace_fields(d: dict) -> dict:
    """The fields of a Trace read from a parsed file, each checked for its type as it is read."""
    # replaying the config must not fail later
    config = _field(d, "config", lambda c: DecodeConfig.from_dict(_plain_dict(c)).validate())
    return dict(model=_field(d, "model", _name), prompt=_field(d, "prompt", _str),
                prompt_token_ids=_each(d, "prompt_token_ids", _int), config=config,
                steps=_each(d, "steps", _step, "step"), sequences=_each(d, "sequences", _sequence, "sequence"),
                nodes=_each(d, "nodes", _node, default=[]),      # 'nodes[3]': a node's own name is its id
                model_facts=_field(d, "model_facts", _plain_dict, {}),
                versions=_field(d, "versions", _plain_dict, {}), timings=_field(d, "timings", _plain_dict, {}),
                forced=_field(d, "forced", _forced, {}), findings=_field(d, "findings", _plain_dict, {}),
                rounds=_each(d, "rounds", _round, "round", default=[]), schema=_field(d, "schema", _str))
