"""The trace reader against hostile files: each is refused with one sentence naming the first
problem, or, when whole, read back with its text exactly as written. The size limit is
checked at its boundary (20 MB = 20,000,000 bytes)."""
from __future__ import annotations

import json
import tracemalloc

import pytest

import hostile_traces
from engine import DecodeConfig, Trace, TraceFormatError, decode
from engine.trace import MAX_TRACE_BYTES

MIB = 2**20


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
        assert str(info.value) == "trace is 20,000,001 bytes, over 20,000,000; the limit is 20 MB"
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


@pytest.fixture(scope="module")
def constrained(llama):
    trace = decode(llama, "The capital of France is", DecodeConfig(
        strategy="greedy", max_new_tokens=6, grammar_kind="choices", grammar='["Paris, the capital", "London"]'))
    assert len(trace.steps) >= 2 and all(s.grammar is not None for s in trace.steps)
    return trace


# ---- constrained traces: what the vocabulary and the masks claim ---------------------------------
def test_every_hostile_constrained_file_is_refused_with_one_sentence(constrained):
    cases = hostile_traces.refused_structured(constrained)
    wrong = []
    for case in cases:
        try:
            Trace.from_json(case.payload)
        except TraceFormatError as exc:
            message = str(exc)
            if not all(w in message for w in case.words) or "\n" in message or len(message) > 300:
                wrong.append((case.name, message))
        else:
            wrong.append((case.name, "accepted"))
    assert not wrong, wrong


def peak_bytes(read) -> int:
    """The most memory Python and numpy held at once while `read()` ran (tracemalloc sees both)."""
    tracemalloc.start()
    try:
        read()
    except TraceFormatError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def test_a_hostile_constrained_file_costs_under_512_mib_more_than_a_normal_one(constrained):
    """The claim of a billion tokens made each mask 125 MB of bits, inflated and unpacked to 2 GB per step."""
    normal = constrained.to_json().encode()
    baseline = peak_bytes(lambda: Trace.from_json(normal))
    costs = {case.name: (peak_bytes(lambda p=case.payload: Trace.from_json(p)) - baseline) / MIB
             for case in hostile_traces.refused_structured(constrained)}
    assert max(costs.values()) < 512, costs


def test_a_mask_is_never_inflated_past_the_vocabulary_ceiling():
    from engine.config import MAX_VOCAB
    from engine.trace.mask import unpack_mask

    bomb = hostile_traces.mask_bomb(hostile_traces.CLAIMED_VOCAB // 8)
    peak = peak_bytes(lambda: pytest.raises(ValueError, unpack_mask, bomb, hostile_traces.CLAIMED_VOCAB))
    assert MAX_VOCAB == 1_048_576 and peak < 2 * MIB, peak
