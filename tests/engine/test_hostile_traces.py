"""The trace reader against hostile files: each is refused with one sentence naming the first
problem, or, when whole, read back with its text exactly as written. The size limit is
checked at its boundary (20 MB = 20,000,000 bytes)."""
from __future__ import annotations

import json

import pytest

import hostile_traces
from engine import DecodeConfig, Trace, TraceFormatError, decode
from engine.trace import MAX_TRACE_BYTES


@pytest.fixture(scope="module")
def real(llama):
    greedy = decode(llama, "The capital of France is", DecodeConfig(strategy="greedy", max_new_tokens=6))
    beam = decode(llama, "The capital of France is", DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=4))
    assert len(greedy.steps) == 6 and len(beam.nodes) >= 8      # the cases edit steps 0..3 and nodes 1..6
    return greedy, beam


def test_every_hostile_file_is_refused_with_one_sentence_naming_the_problem(real):
    cases = hostile_traces.refused(*real)
    assert len(cases) >= 40
    wrong = []
    for case in cases:
        try:
            Trace.from_json(case.payload)
        except TraceFormatError as exc:
            message = str(exc)
            if (not all(words in message for words in case.words) or "\n" in message or len(message) > 300
                    or "Error:" in message):        # one sentence, no exception class names
                wrong.append((case.name, message))
        else:
            wrong.append((case.name, "accepted"))
    assert not wrong, wrong


def test_the_first_problem_is_named(real):
    greedy, _ = real
    data = greedy.to_dict()
    data["steps"][3]["chosen_ids"] = [999_999]
    data["steps"][4]["candidates"] = []
    vocab = greedy.model_facts["vocab_size"]
    with pytest.raises(TraceFormatError) as info:
        Trace.from_json(json.dumps(data))
    assert str(info.value) == (f"trace is inconsistent: step 4: chosen token 999999 is outside the vocabulary "
                               f"of {vocab:,}")


@pytest.mark.parametrize("index", [0, 1])
def test_a_whole_file_with_markup_in_its_text_is_read_exactly(real, index):
    case = hostile_traces.accepted(*real)[index]
    trace = Trace.from_json(case.payload)
    assert trace.prompt == hostile_traces.MARKUP and trace.model == hostile_traces.MARKUP
    assert {c.text for s in trace.steps for c in s.candidates} == {hostile_traces.MARKUP}
    assert trace.model_facts["name"] == f"![x]({hostile_traces.PIXEL}-name.png)"
    assert json.loads(trace.to_json()) == json.loads(case.payload)


def padded(trace: Trace, size: int) -> bytes:
    """The trace's JSON padded with trailing spaces to exactly `size` bytes (still valid JSON)."""
    text = trace.to_json().encode()
    assert len(text) < size
    return text + b" " * (size - len(text))


def test_the_size_limit_is_20_mb_in_decimal_bytes(real):
    greedy, _ = real
    assert MAX_TRACE_BYTES == 20_000_000
    assert Trace.from_json(padded(greedy, 20_000_000)) == greedy
    assert Trace.from_json(padded(greedy, 20_000_000).decode()) == greedy
    for payload in (padded(greedy, 20_000_001), padded(greedy, 20_000_001).decode()):
        with pytest.raises(TraceFormatError) as info:
            Trace.from_json(payload)
        assert str(info.value) == "trace is 20.0 MB; the limit is 20 MB"
    with pytest.raises(TraceFormatError, match="trace is 20.6 MB; the limit is 20 MB"):
        Trace.from_json(padded(greedy, 20_600_000))


def test_brackets_inside_text_do_not_count_as_nesting(real):
    greedy, _ = real
    data = greedy.to_dict()
    data["prompt"] = "[" * 5000 + '{"\\"' + "}" * 10
    assert Trace.from_json(json.dumps(data)).prompt == data["prompt"]


@pytest.mark.parametrize("text", [":material/home: :smile:", "![x](http://h/p.png)", ":red[alarm] <img src=x>"])
def test_markdown_escaping_leaves_no_image_tag_or_shortcode(text):
    import re

    from figures.labels import WORD_JOINER, for_markdown

    md = for_markdown(text)
    # backslash escapes, and an invisible joiner that keeps addresses from becoming links: shown as written
    assert re.sub(r"\\(.)", r"\1", md).replace(WORD_JOINER, "") == text
    bare = re.sub(r"\\.", "", md)                           # what is left for Markdown to interpret
    for trigger in (":material", ":smile", "![", ":red[", "<img"):
        assert trigger not in bare, (trigger, md)
