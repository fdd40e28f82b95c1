"""Constrained decoding against llguidance's own matcher, driven by hand over the model's logits.

The reference walk below shares nothing with engine/grammar/constrain.py: it builds its own llguidance tokenizer and
matcher, runs the model on the whole sequence at every step (no KV cache), masks with llguidance's own
numpy helpers, and takes the argmax. The engine's greedy ids, every recorded mask and every Z_t must agree.
Validity is checked with jsonschema and Python's re, never with the grammar library.
"""
from __future__ import annotations

import json
import re

import jsonschema
import llguidance
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import ConfigError, DecodeConfig, Trace, TraceFormatError, decode
from engine.config import MAX_GRAMMAR_BYTES
from engine.grammar.constrain import stop_reason
from engine.trace.mask import pack_mask, unpack_mask
from grammar_reference import reference_greedy
from tiers import examples

PROMPT = "The capital of France is"
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "name": {"type": "string", "maxLength": 4}},
          "required": ["ok", "name"], "additionalProperties": False}
CASES = {
    "json_schema": (json.dumps(SCHEMA), lambda schema: llguidance.LLMatcher.grammar_from_json_schema(
        schema, overrides={"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "})),
    "regex": (r"[0-9]{2}-[a-z]{2,3}", llguidance.LLMatcher.grammar_from_regex),
    "choices": (json.dumps(["Paris", "Rome", "Lyon"]),
                lambda text: llguidance.grammar_from("choice", text)),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_greedy_ids_masks_and_feasible_mass_equal_the_librarys_own(llama, kind):
    text, compile_grammar = CASES[kind]
    config = DecodeConfig(strategy="greedy", max_new_tokens=24, grammar_kind=kind, grammar=text)
    trace = decode(llama, PROMPT, config)
    ids, masks, feasible = reference_greedy(llama, trace.prompt_token_ids, compile_grammar(text), 24)
    assert [s.chosen_ids[0] for s in trace.steps] == ids
    for step, mask, z in zip(trace.steps, masks, feasible):
        recorded = unpack_mask(step.grammar.mask, llama.facts.vocab_size).numpy()
        assert (recorded == mask).all(), f"step {step.index + 1}"
        assert step.grammar.allowed == int(mask.sum())
        assert step.grammar.forced == (int(mask.sum()) == 1)
        assert step.grammar.feasible_mass == pytest.approx(z, rel=1e-4, abs=1e-6)
        removed = [t.token_id for t in step.grammar.removed]
        assert not any(mask[i] for i in removed)


def test_the_output_is_valid_and_the_trace_reads_back(llama):
    text = CASES["json_schema"][0]
    trace = decode(llama, PROMPT, DecodeConfig(max_new_tokens=40, grammar_kind="json_schema", grammar=text))
    assert stop_reason(trace) == "complete"
    jsonschema.validate(json.loads(trace.best.text), SCHEMA)
    again = Trace.from_json(trace.to_json())
    assert again.steps == trace.steps and again.config == trace.config


def test_a_run_out_of_tokens_says_so(llama):
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    trace = decode(llama, PROMPT, DecodeConfig(max_new_tokens=3, grammar_kind="json_schema", grammar=schema))
    assert stop_reason(trace) == "max_tokens"
    with pytest.raises(json.JSONDecodeError):
        json.loads(trace.best.text)


def test_beam_search_under_a_grammar_keeps_one_matcher_per_hypothesis(llama):
    pattern = r"(ab|ba)[0-9]{3}"
    config = DecodeConfig(strategy="beam", num_beams=3, num_return_sequences=3, max_new_tokens=12,
                          grammar_kind="regex", grammar=pattern)
    trace = decode(llama, PROMPT, config)
    for seq in trace.sequences:
        assert re.fullmatch(pattern, seq.text), seq.text


@pytest.mark.parametrize("kind,text,words", [
    ("json_schema", "{not json", "not JSON"),
    ("json_schema", "[1, 2]", "JSON object"),
    ("regex", "(ab", "unclosed group"),
    ("regex", "[a&&b]", "no text matches"),
    ("choices", "yes,no", "JSON list"),
    ("lark", "start: foo", "foo"),
])
def test_a_bad_grammar_is_named_in_one_line(llama, kind, text, words):
    with pytest.raises(ConfigError) as info:
        decode(llama, PROMPT, DecodeConfig(grammar_kind=kind, grammar=text, max_new_tokens=2))
    message = str(info.value)
    assert message.startswith("grammar") and words in message and "\n" not in message


def test_a_huge_schema_and_a_feedback_strategy_are_refused_before_any_work():
    huge = json.dumps({"type": "object", "description": "x" * 1_000_000})
    with pytest.raises(ConfigError, match=f"{MAX_GRAMMAR_BYTES:,} bytes"):
        DecodeConfig(grammar_kind="json_schema", grammar=huge).validate()
    with pytest.raises(ConfigError, match="soft"):
        DecodeConfig(strategy="soft", grammar_kind="regex", grammar="a+").validate()


def _trace_dict(llama):
    text = CASES["regex"][0]
    return decode(llama, PROMPT, DecodeConfig(max_new_tokens=6, grammar_kind="regex", grammar=text)).to_dict()


@pytest.mark.parametrize("edit,words", [
    (lambda g: g.update(allowed=g["allowed"] + 1), "its mask allows"),
    (lambda g: g.update(mask="not base64!"), "base64"),
    (lambda g: g.update(mask=pack_mask(torch.ones(100_000, dtype=torch.bool))), "does not unpack"),
    (lambda g: g.update(mask="A" * 300_000), "at most"),
    (lambda g: g.update(forced=not g["forced"]), "forced"),
    (lambda g: g.update(feasible_mass=1.5), "feasible_mass"),
    (lambda g: g.update(removed=[{"token_id": 5, "text": "x", "prob": 0.1}] * 11), "more than 10"),
])
def test_a_hostile_grammar_record_is_refused_naming_it(llama, edit, words):
    data = _trace_dict(llama)
    edit(data["steps"][2]["grammar"])
    with pytest.raises(TraceFormatError) as info:
        Trace.from_dict(json.loads(json.dumps(data)))
    assert "step 3" in str(info.value) and words in str(info.value)


def test_a_chosen_token_outside_the_mask_is_refused(llama):
    data = _trace_dict(llama)
    step = data["steps"][0]
    allowed = unpack_mask(step["grammar"]["mask"], llama.facts.vocab_size)
    outside = int((~allowed).nonzero()[0])
    step["grammar"]["mask"] = pack_mask(allowed)
    step["chosen_ids"] = [outside]
    data["sequences"][0]["token_ids"][0] = outside
    with pytest.raises(TraceFormatError, match="not one the mask allows"):
        Trace.from_dict(data)


# ---- any small schema or pattern, any seed: the sampled output is valid -----------------------------
LEAVES = st.sampled_from([
    {"type": "boolean"},
    {"type": "integer", "minimum": 0, "maximum": 99},
    {"type": "string", "maxLength": 3},
    {"enum": ["red", "green", "blue"]},
    {"type": "null"},
])
SCHEMAS = st.dictionaries(st.sampled_from(["a", "b", "id", "név"]), LEAVES, min_size=1, max_size=3).map(
    lambda props: {"type": "object", "properties": props, "required": sorted(props), "additionalProperties": False})
PIECES = st.sampled_from([r"[a-c]{1,3}", r"[0-9]{2}", r"(yes|no)", r"x?", r"-", r"[A-Z]", r"(ab){1,2}"])
PATTERNS = st.lists(PIECES, min_size=1, max_size=4).map("".join)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schema=SCHEMAS, seed=st.integers(0, 2**32), temperature=st.sampled_from([0.7, 1.0, 1.5]))
def test_sampled_json_is_valid_for_any_small_schema(llama, schema, seed, temperature):
    config = DecodeConfig(strategy="sample", seed=seed, temperature=temperature, max_new_tokens=64,
                          grammar_kind="json_schema", grammar=json.dumps(schema))
    trace = decode(llama, PROMPT, config)
    assert stop_reason(trace) == "complete"
    jsonschema.validate(json.loads(trace.best.text), schema)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=PATTERNS, seed=st.integers(0, 2**32), top_k=st.sampled_from([0, 5]))
def test_sampled_text_matches_any_small_pattern(llama, pattern, seed, top_k):
    config = DecodeConfig(strategy="sample", seed=seed, top_k=top_k, max_new_tokens=32, grammar_kind="regex",
                          grammar=pattern)
    trace = decode(llama, PROMPT, config)
    assert stop_reason(trace) == "complete"
    assert re.fullmatch(pattern, trace.best.text), (pattern, trace.best.text)


def test_on_the_bundled_model_greedy_json_equals_the_librarys_walk(bundled):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
              "required": ["city"], "additionalProperties": False}
    text = json.dumps(schema)
    trace = decode(bundled, PROMPT, DecodeConfig(max_new_tokens=16, grammar_kind="json_schema", grammar=text))
    ids, masks, feasible = reference_greedy(bundled, trace.prompt_token_ids,
                                            CASES["json_schema"][1](text), 16)
    assert [s.chosen_ids[0] for s in trace.steps] == ids
    for step, mask, z in zip(trace.steps, masks, feasible):
        assert (unpack_mask(step.grammar.mask, bundled.facts.vocab_size).numpy() == mask).all()
        assert step.grammar.feasible_mass == pytest.approx(z, rel=1e-3, abs=1e-6)
    jsonschema.validate(json.loads(trace.best.text), schema)
