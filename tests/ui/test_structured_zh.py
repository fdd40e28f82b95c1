"""Structured output under lang=zh: every sentence the page writes is Chinese, the verdicts and the grammar
errors included (the engine names them; the page's texts say them). What stays Latin is what the model wrote,
a token, a grammar's own text and what a library wrote, all shown as code or as the model's text."""
from __future__ import annotations

import re

import pytest

from app_helpers import THREE_WORDS, latin_runs, open_app, texts, unescaped
from engine.grammar.constrain import output_verdict, VERDICT_WORDS
from figures.labels import one_line, visible

pytestmark = pytest.mark.usefixtures("navigation_frame")
ZH = texts("structured", "zh")


def _own_texts(at) -> list:
    """What the model wrote (texts and tokens, as the page shows them), the prompt and the grammar's text."""
    own = [at.session_state["prompt"], at.text_area(key="so_grammar").value]
    for name in ("so_last", "so_free"):
        if name in at.session_state:
            trace = at.session_state[name]
            own += [unescaped(one_line(trace.best.text)), trace.best.text]
            for step in trace.steps:
                own += [visible(c.text) for c in step.candidates] + [visible(x) for x in step.chosen_texts]
    return own


@pytest.mark.parametrize("params,grammar", [
    ({"so_kind": "json_schema", "so_example": "city", "so_strategy": "beam"}, None),      # ran out of tokens
    ({"so_kind": "regex", "so_example": "yes_no", "so_strategy": "greedy"}, None),
    ({"so_kind": "choices", "so_example": "cities", "so_strategy": "sample"}, '["Paris", 3]'),    # a bad grammar
    ({"so_kind": "json_schema", "so_example": "city", "so_strategy": "greedy"}, '{"type": "object"'),
])
def test_every_sentence_on_structured_output_is_chinese(tiny_loads, params, grammar):
    at = open_app("structured", params={**params, "lang": "zh"}, new_tokens=6)
    if grammar is not None:
        at.text_area(key="so_grammar").input(grammar).run()
        assert not at.exception and at.error
    runs = latin_runs(at, _own_texts(at))
    assert not runs, runs


@pytest.mark.parametrize("kind,grammar,output,verdict", [
    ("json_schema", '{"type": "object"}', '{"a": 1} {"b": 2}', "not_json"),                 # Extra data
    ("json_schema", '{"type": "object"}', '{"a": 1', "not_json"),                            # Expecting ',' …
    ("json_schema", '{"type": "object", "properties": {"a": {"maxLength": 2}}}', '{"a": "long"}', "not_schema"),
    ("json_schema", '{"type": "object"}', "{}", "schema_match"),
    ("regex", "a+", "b", "re_no_match"), ("regex", "a+", "aa", "re_match"),
    ("choices", '["x", "y"]', "z", "no_choice"), ("choices", '["x", "y"]', "x", "choice"),
    ("lark", "start: \"x\"", "x", "lark"),
])
def test_each_verdict_reads_in_chinese(monkeypatch, kind, grammar, output, verdict):
    import ui.i18n
    from ui.grammar_words import verdict_text

    monkeypatch.setattr(ui.i18n, "language", lambda: "zh")
    valid, name, values = output_verdict(kind, grammar, output)
    assert name == verdict and name in VERDICT_WORDS
    said = re.sub(r"`[^`]*`", " ", verdict_text(name, values))
    assert re.search(r"[\u4e00-\u9fff]", said) and not THREE_WORDS.search(said), said


def test_every_reason_and_verdict_the_engine_names_has_words_in_both_languages():
    """The grammar's and the schema's reasons (each `_bad(message, "reason", ...)` in their source) and every verdict of
    the second check have a sentence on the page, in English and in Chinese."""
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    reasons = set()
    for module in ("engine/grammar/constrain.py", "engine/grammar/json_schema.py"):
        source = (root / module).read_text(encoding="utf-8")
        reasons |= set(re.findall(r'[")]\s*,\s*"([a-z_]+)"(?=\s*[,)])', source))    # message, "reason", values
    assert {"choices_not_list", "schema_outside", "schema_true", "schema_too_deep"} <= reasons
    for lang in ("en", "zh"):
        words = json.loads((root / "assets" / "texts" / lang / "structured.json").read_text(encoding="utf-8"))
        assert not [r for r in reasons if f"error_{r}" not in words], lang
        assert not [v for v in VERDICT_WORDS if f"why_{v}" not in words], lang
