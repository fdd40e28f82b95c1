"""A speculative trace read from a file: every round checked whole and bounded, each hostile edit refused with
one sentence naming the round and draft, and a whole file read back exactly."""
from __future__ import annotations

import pytest

import hostile_traces
from tiny_models import tiny_gpt2
from trace_builders import kept_then_rejected_run
from engine import Trace, TraceFormatError


@pytest.fixture(scope="module")
def spec(llama):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)         # tiny models: one thread (two wait on each other on a busy 2-core machine)
    try:
        yield kept_then_rejected_run(llama, tiny_gpt2(seed=5))
    finally:
        torch.set_num_threads(before)


def test_a_whole_speculative_trace_reads_back_exactly(spec):
    again = Trace.from_json(spec.to_json())
    assert again == spec


def test_every_hostile_round_is_refused_with_one_sentence(spec):
    wrong = []
    for case in hostile_traces.refused_speculative(spec):
        try:
            Trace.from_json(case.payload)
        except TraceFormatError as exc:
            message = str(exc)
            if not all(w in message for w in case.words) or "\n" in message or len(message) > 300:
                wrong.append((case.name, message))
        else:
            wrong.append((case.name, "accepted"))
    assert not wrong, wrong
