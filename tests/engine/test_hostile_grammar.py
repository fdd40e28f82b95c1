"""Checking a constrained output against hostile grammars: patterns that make a backtracking matcher run for
ever, schemas that reach outside themselves, nest without end or are true/false.

Each pattern is checked while another thread keeps running, and no user's pattern reaches Python's re; each
schema is refused with one line (the same the CLI and the page show), and none opens a connection. The
trace files that claim too much are in test_hostile_traces.py, the flags in test_cli_hostile.py.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

import hostile_traces
from cli_helpers import assert_one_error_line, cli_in_process
from engine import ConfigError, DecodeConfig, Trace, TraceFormatError, decode
from engine.grammar.constrain import output_check, parse_schema

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def constrained(llama):
    trace = decode(llama, PROMPT, DecodeConfig(strategy="greedy", max_new_tokens=6, grammar_kind="choices",
                                               grammar='["Paris, the capital", "London"]'))
    assert len(trace.steps) >= 2 and all(s.grammar is not None for s in trace.steps)
    return trace


# ---- patterns that would backtrack for ever ---------------------------------------------------------
N = 5000          # Python's re tries about 2**N ways for (a+)+$ over N a's and a b
CATASTROPHIC = [  # (kind, grammar, output, valid), each answer worked out by hand
    ("regex", "(a+)+$", "a" * N + "b", False),
    ("regex", "(a+)+$", "a" * N, True),
    ("regex", "(a|aa)+c", "a" * N, False),
    ("json_schema", {"type": "string", "pattern": "^(a+)+$"}, "a" * N + "b", False),
    ("json_schema", {"type": "string", "pattern": "(x+x+)+y"}, "x" * N + "y", True),
    # the key "aaa" matches, so its value must be a whole number; the long key matches nothing
    ("json_schema", {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}}},
     {"a" * N + "b": 1, "aaa": "x"}, False),
    ("json_schema", {"type": "object", "properties": {}, "patternProperties": {"^(x+x+)+y$": {}},
                     "additionalProperties": False}, {"x" * N: 1}, False),
]


def test_catastrophic_patterns_are_checked_while_another_thread_keeps_ticking():
    """Python's re holds the GIL through all 2**5000 ways; the grammar library's matcher reads each byte once."""
    ticks, done = [0], threading.Event()

    def tick():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    results = []

    def check():
        for kind, grammar, output, _ in CATASTROPHIC:
            text = grammar if kind == "regex" else json.dumps(grammar)
            results.append(output_check(kind, text, output if kind == "regex" else json.dumps(output))[0])

    ticker, checker = threading.Thread(target=tick, daemon=True), threading.Thread(target=check, daemon=True)
    ticker.start()
    checker.start()
    start = ticks[0]
    checker.join()
    during = ticks[0] - start
    done.set()
    ticker.join()
    assert results == [valid for *_, valid in CATASTROPHIC]
    assert during >= 1, "the other thread never ran while the patterns were checked"


def test_a_pattern_the_matcher_does_not_read_is_not_handed_to_python_re(monkeypatch):
    import re

    def no_re(*args, **kwargs):
        raise AssertionError("a pattern from the user reached Python's re")

    for name in ("compile", "search", "match", "fullmatch"):
        monkeypatch.setattr(re, name, no_re)
    assert output_check("regex", "(a)\\1", "aa")[0] is None                     # a backreference
    schema = json.dumps({"type": "string", "pattern": "(?=a)a"})               # a lookahead
    assert output_check("json_schema", schema, '"a"')[0] is None


# ---- schemas: references, nesting, true/false -----------------------------------------------------
@pytest.mark.parametrize("name", list(hostile_traces.schema_cases("http://127.0.0.1:9")))
def test_each_hostile_schema_is_refused_with_one_line(name):
    schema, words = hostile_traces.schema_cases("http://127.0.0.1:9")[name]
    with pytest.raises(ConfigError) as info:
        parse_schema(hostile_traces.schema_text(schema))
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_a_schema_of_64_levels_is_read_and_65_is_refused():
    def nested(levels):      # each {"items": ...} is one level; the innermost {} is the last
        return '{"items": ' * (levels - 1) + "{}" + "}" * (levels - 1)

    assert parse_schema(nested(64))
    with pytest.raises(ConfigError, match="nested more than 64 levels"):
        parse_schema(nested(65))


def test_local_references_still_resolve():
    schema = json.dumps({"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}})
    assert output_check("json_schema", schema, "[1, 2]")[0] is True
    assert output_check("json_schema", schema, '[1, "x"]')[0] is False


def attempt(check):
    """check()'s answer, or the exception it raised (as the answer (None, its text)), so that every place is
    tried before any assertion."""
    try:
        return check()
    except Exception as exc:         # noqa: BLE001 - a traceback is one of the outcomes compared
        return None, f"{type(exc).__name__}: {exc}"


def test_no_schema_reference_reaches_the_socket(capsys, monkeypatch, tmp_path, tiny_llama_folder, constrained):
    """Every place a schema is read, handed a $ref to a listening socket: the CLI flag, an uploaded trace, the
    output check, and jsonschema's registry on its own (the schema's own check left out). No connection first,
    then each place's one line."""
    from engine.grammar.json_schema import OUTSIDE, check_output

    with hostile_traces.Listener() as listener:
        ref = {"type": "object", "properties": {"a": {"$ref": f"{listener.address}/a.json"}}}
        path = tmp_path / "schema.json"
        path.write_text(json.dumps(ref))
        result = cli_in_process(capsys, monkeypatch, "--prompt", PROMPT, "--json-schema", str(path),
                                "--max-new-tokens", "4", model=tiny_llama_folder[1])
        data = constrained.to_dict()
        data["config"].update(grammar_kind="json_schema", grammar=json.dumps(ref))
        try:
            upload = str(Trace.from_json(json.dumps(data)))
        except TraceFormatError as exc:
            upload = str(exc)
        checked = [attempt(lambda: output_check("json_schema", json.dumps(ref), '{"a": 1}')),
                   attempt(lambda: english(check_output({"$ref": f"{listener.address}/x.json"}, 1)))]
        library = attempt(lambda: grammar_library_reads(ref))      # the grammar library, handed it directly
    assert listener.connections == 0
    assert_one_error_line(result, f"grammar: {OUTSIDE}")
    assert OUTSIDE in upload, upload
    assert [valid for valid, _ in checked] == [None, None] and all(OUTSIDE in why for _, why in checked), checked
    assert "does not fetch" in library, library


def english(verdict: tuple) -> tuple:
    """check_output's (valid, verdict, values) as (valid, the English sentence)."""
    from engine.grammar.constrain import VERDICT_WORDS

    valid, name, values = verdict
    return valid, VERDICT_WORDS[name].format(**values)


def grammar_library_reads(schema) -> str:
    """What llguidance says of a schema it is handed without our check: its error, or '' when it reads it."""
    from llguidance import LLMatcher

    from engine.grammar.linear_match import byte_tokenizer

    return LLMatcher.validate_grammar(LLMatcher.grammar_from_json_schema(schema), byte_tokenizer())




@pytest.mark.parametrize("kind, text, output, words", [
    ("json_schema", '{"enum": ["\\ud800"]}', '"yes"', "unpaired surrogate"),
    ("choices", '["\\udc80", "yes"]', "yes", "unpaired surrogate"),
    ("choices", "not a list", "yes", "JSON list of strings"),
])
def test_a_grammar_that_is_not_text_or_not_its_kind_is_named_not_raised(kind, text, output, words):
    """A lone surrogate escaped in JSON parses, but neither UTF-8 nor the grammar library can hold it: one line
    before any decode, and an uploaded trace's output check answers 'not checked' instead of raising."""
    from engine.grammar.constrain import check_grammar

    with pytest.raises(ConfigError, match=words):
        check_grammar(kind, text)
    valid, why = output_check(kind, text, output)
    assert valid is None and words in why, why
