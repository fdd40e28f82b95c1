"""The shared decode service: the same request is answered from memory, computed once across
threads, bounded in bytes (least recently used first), and a stopped decode is never kept."""
from __future__ import annotations

import threading

import pytest

from engine import DecodeConfig, decode
from engine.service import DecodeService, trace_bytes

PROMPT = "The capital of France is"
GREEDY = DecodeConfig(strategy="greedy", max_new_tokens=6)


class Counting:
    """Counts the model's forward passes (the work the service exists to avoid)."""

    def __init__(self, lm):
        self.calls = 0
        self.hook = lm.model.register_forward_hook(self._count)

    def _count(self, *_):
        self.calls += 1

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.hook.remove()


@pytest.fixture(autouse=True)
def no_eos(llama, monkeypatch):
    monkeypatch.setattr(llama, "eos_token_ids", ())


def test_the_same_request_is_answered_from_memory(llama):
    service = DecodeService()
    with Counting(llama) as count:
        first = service.decode(llama, PROMPT, GREEDY)
        assert count.calls == 6
        again = service.decode(llama, PROMPT, GREEDY.replace())      # an equal config is the same request
        assert count.calls == 6
    assert again is first
    assert first.best.token_ids == decode(llama, PROMPT, GREEDY).best.token_ids
    assert (service.hits, service.misses) == (1, 1)


def test_every_part_of_the_request_is_in_the_key(llama):
    service = DecodeService()
    base = service.decode(llama, PROMPT, GREEDY)
    other = [service.decode(llama, PROMPT + " a", GREEDY), service.decode(llama, PROMPT, GREEDY.replace(top_n=5)),
             service.decode(llama, PROMPT, GREEDY, forced={2: base.steps[2].candidates[1].token_id})]
    assert service.misses == 4 and service.hits == 0
    assert other[2].best.token_ids[2] == base.steps[2].candidates[1].token_id


def test_two_callers_at_once_compute_once(llama):
    service = DecodeService()
    started, release = threading.Event(), threading.Event()
    waited = []

    def slow(lane, step):            # the first caller holds its decode open until the second is waiting
        started.set()
        release.wait(30)

    results = {}

    def first():
        results["a"] = service.decode(llama, PROMPT, GREEDY, on_step=slow)

    def second():
        started.wait(30)
        results["b"] = service.decode(llama, PROMPT, GREEDY, on_wait=lambda: (waited.append(1), release.set()))

    with Counting(llama) as count:
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
    assert results["a"] is results["b"]
    assert waited == [1] and count.calls == 6 and service.waits == 1


def test_a_stopped_decode_is_returned_but_not_kept(llama):
    service = DecodeService()
    part = service.decode(llama, PROMPT, GREEDY, on_step=lambda lane, step: step.index < 2)
    assert len(part.steps) == 3 and len(service) == 0
    full = service.decode(llama, PROMPT, GREEDY)
    assert len(full.steps) == 6 and full.best.token_ids[:3] == part.best.token_ids


def test_the_store_is_bounded_in_bytes_least_recently_used_first(llama):
    one = decode(llama, PROMPT, GREEDY)
    service = DecodeService(max_bytes=int(trace_bytes(one) * 2.5))
    prompts = [PROMPT, PROMPT + " Rome", PROMPT + " Paris"]
    service.decode(llama, prompts[0], GREEDY)
    service.decode(llama, prompts[1], GREEDY)
    service.decode(llama, prompts[0], GREEDY)          # 0 is now the most recent
    service.decode(llama, prompts[2], GREEDY)          # over the bound: 1 goes
    assert service.bytes <= service.max_bytes
    assert service.cached(llama, prompts[0], GREEDY) is not None
    assert service.cached(llama, prompts[1], GREEDY) is None
    assert service.cached(llama, prompts[2], GREEDY) is not None


def test_the_bound_is_a_setting(monkeypatch):
    monkeypatch.setenv("DECODESCOPE_RESULT_CACHE_BYTES", "12345")
    assert DecodeService().max_bytes == 12345


def test_lanes_share_the_store_with_single_decodes(llama):
    service = DecodeService()
    lanes = [GREEDY, DecodeConfig(strategy="sample", max_new_tokens=6, seed=3)]
    greedy = service.decode(llama, PROMPT, GREEDY)
    with Counting(llama) as count:
        traces = service.decode_lanes(llama, PROMPT, lanes)
        assert count.calls == 6                          # only the sampling lane ran; greedy came from memory
        assert traces[0] is greedy
        again = service.decode(llama, PROMPT, lanes[1])
        assert count.calls == 6 and again is traces[1]
    assert traces[1].best.token_ids == decode(llama, PROMPT, lanes[1]).best.token_ids


def test_an_error_reaches_every_caller_and_nothing_is_kept(llama):
    service = DecodeService()
    from engine.errors import ConfigError

    with pytest.raises(ConfigError):
        service.decode(llama, "", GREEDY)
    assert len(service) == 0 and not service._pending


def test_other_results_are_remembered_once_bounded_and_errors_are_not_kept(llama):
    """Teacher forcing's scores, a soft lane: computed once per key (the model's forward passes counted), evicted
    with the traces under one byte bound, and a refusal reaches the caller without being kept."""
    from engine.inside.teacher import teacher_force
    from engine.errors import ConfigError

    service = DecodeService()
    with Counting(llama) as count:
        first = service.remember(("scores", PROMPT), lambda: teacher_force(llama, PROMPT, " Paris is big"))
        passes = count.calls
        again = service.remember(("scores", PROMPT), lambda: teacher_force(llama, PROMPT, " Paris is big"))
        assert again is first and count.calls == passes and passes >= 1
    assert first.reference_ids == teacher_force(llama, PROMPT, " Paris is big").reference_ids
    assert (service.hits, service.misses) == (1, 1) and service.bytes > 0

    def refused():
        raise ConfigError("reference", "the reference is empty")

    with pytest.raises(ConfigError):
        service.remember(("scores", ""), refused)
    assert service.remember(("scores", ""), lambda: "computed again") == "computed again"

    small = DecodeService(max_bytes=service.bytes + 10)     # room for one set of scores
    small.remember(("a",), lambda: teacher_force(llama, PROMPT, " Paris is big"))
    small.remember(("b",), lambda: teacher_force(llama, PROMPT, " Rome is old"))
    assert small.bytes <= small.max_bytes and len(small) == 1
    assert small.remember(("b",), lambda: None) is not None            # b stayed, a went
