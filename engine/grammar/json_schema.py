"""A JSON Schema from a user or a file: read within limits, and a decoded output checked against it.

A schema is read by the grammar library (which builds the grammar), by jsonschema (which checks the output a
second time) and by the trace reader (a file's grammar). Whatever the schema says, none of them may:
- recurse without end: a schema nests at most MAX_SCHEMA_DEPTH levels of JSON objects and arrays, checked on
  the text before it is parsed;
- reach out: a `$ref` resolves only inside the document ("#/$defs/x"); jsonschema would fetch any other
  (http://, file:, a relative name) with urllib, so such a schema is refused, and the validator's registry
  refuses to retrieve anything besides;
- backtrack: jsonschema matches `pattern` and `patternProperties` with Python's re, where `(a+)+$` over
  "aaaa…ab" takes 2^n steps holding the GIL; here they go to the grammar library's linear matcher.
"""
from __future__ import annotations

import functools
import json

from engine.errors import ConfigError
from engine.trace.reader import brackets, nesting

MAX_SCHEMA_DEPTH = 64         # JSON objects and arrays; a real schema of nested objects nests about 10 deep
REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
OUTSIDE = "references outside the schema are not followed"


# json's own messages for a text that is not JSON, by the short name a page translates ("other": another one)
JSON_PROBLEMS = {"Expecting value": "value", "Expecting ',' delimiter": "comma", "Expecting ':' delimiter": "colon",
                 "Expecting property name enclosed in double quotes": "name", "Extra data": "extra",
                 "Unterminated string starting at": "unterminated", "Invalid control character at": "control",
                 "Invalid \\escape": "escape"}


def _bad(message: str, reason: str, /, **values):
    """A schema that cannot be used: the English sentence, and its reason and values for a page to translate."""
    raise ConfigError("grammar", f"grammar: {message}", reason, **values)


def parse_schema(text: str):
    """The JSON Schema in `text`, parsed and checked: nesting, a whole-document true/false, references.
    Raises ConfigError with one line naming what is wrong."""
    if nesting(brackets(text), MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        _bad(f"the JSON schema is nested more than {MAX_SCHEMA_DEPTH} levels deep (objects and arrays)",
             "schema_too_deep", most=MAX_SCHEMA_DEPTH)
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        _bad(f"the JSON schema is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", "schema_not_json",
             line=exc.lineno, column=exc.colno, problem=JSON_PROBLEMS.get(exc.msg, "other"), message=exc.msg)
    if not _is_text(schema):
        _bad("the JSON schema holds an unpaired surrogate (a \\ud800-style escape that is not half of a "
             "character), which is not text", "schema_surrogate")
    if schema is True:
        _bad("the JSON schema true allows every JSON value, so it constrains nothing; write what the output must "
             "be, like {\"type\": \"object\"}", "schema_true")
    if schema is False:
        _bad("the JSON schema false allows no value at all, so no output can match it", "schema_false")
    if not isinstance(schema, dict):
        _bad("a JSON schema must be a JSON object, like {\"type\": \"object\"}", "schema_not_object")
    outside = outside_reference(schema)
    if outside is not None:
        _bad(f"{OUTSIDE} ({outside[0]} {json.dumps(outside[1][:80], ensure_ascii=False)}); "
             "a reference must start with #, like \"#/$defs/item\"", "schema_outside", keyword=outside[0],
             target=str(outside[1])[:80])
    return schema


def _is_text(value) -> bool:
    """Whether every text in a parsed JSON value is real Unicode (JSON can carry a lone surrogate as an escape,
    which the grammar library and UTF-8 cannot hold)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def outside_reference(schema) -> tuple | None:
    """(keyword, target) of the first reference that does not point inside the document, else None. Walked with
    a stack, not recursion (the depth is bounded already, but a walk needs no bound)."""
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in REFERENCES and isinstance(value, str) and not value.startswith("#"):
                    return key, value
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _refuse(uri: str):
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)


@functools.cache
def _registry():
    """Only the document itself and the drafts' own meta-schemas (which jsonschema adds): nothing is retrieved."""
    from referencing import Registry

    return Registry(retrieve=_refuse)


class Unchecked(Exception):
    """A part of the schema the linear matcher cannot read: the output is not checked a second time."""


def _search(pattern: str, text: str) -> bool:
    from engine.grammar.linear_match import search

    found = search(pattern, text)
    if found is None:
        raise Unchecked(pattern)
    return found


def _pattern(validator, pattern, instance, schema):
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    """jsonschema's own rule, with the property names matched against patternProperties by the linear matcher."""
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    named, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [key for key in instance if key not in named and not any(_search(p, key) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(e) for e in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


@functools.cache
def _linear(draft):
    """The draft's validator with its regex keywords on the linear matcher."""
    from jsonschema.validators import extend

    return extend(draft, {"pattern": _pattern, "patternProperties": _pattern_properties,
                          "additionalProperties": _additional_properties})


def check_output(schema: dict, value) -> tuple:
    """(valid, verdict, values) for a parsed JSON value against a schema from parse_schema: True/False, or None
    when jsonschema cannot check it; the verdict is named for engine.grammar.constrain.VERDICT_WORDS."""
    import jsonschema
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    draft = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if "unevaluatedProperties" in json.dumps(schema) and "patternProperties" in json.dumps(schema):
        # jsonschema works out what unevaluatedProperties leaves with Python's re, deep inside; not run here
        return None, "schema_mixed", {}
    try:
        draft.check_schema(schema, format_checker=None)     # a format check would compile patterns with re
        error = best_match(_linear(draft)(schema, registry=_registry()).iter_errors(value))
    except jsonschema.SchemaError:
        return None, "schema_unread", {}
    except Unresolvable:
        return None, "schema_unresolved", {}
    except Unchecked:
        return None, "schema_pattern_unread", {}
    except RecursionError:
        return None, "schema_recursion", {}
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        return False, "not_schema", {"message": error.message[:200], "keyword": str(error.validator)[:40],
                                     "where": where}
    return True, "schema_match", {}
