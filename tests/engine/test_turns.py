"""Forward passes through a shared model take turns, the urgent ones first (engine.model.turns)."""
import contextlib
import threading
import time

import pytest
import torch

from engine import DecodeConfig, decode
from engine.model import LoadedModel, take_turns, urgent
from generate_reference import generate_ids, strip_generated
from tiny_models import tiny_llama

HANG_GUARD_S = 60         # a broken lock would hang the test, not fail it: threads are joined with this bound


def _ids(n: int = 5) -> torch.Tensor:
    return torch.arange(1, n + 1)[None]


def _wait_for(condition) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, "the threads never reached the expected state"
        time.sleep(0.002)


def _inside(lm: LoadedModel, on_enter) -> None:
    """Call on_enter(thread name) from inside every forward pass (a hook on the model's last norm)."""
    lm.model.model.norm.register_forward_pre_hook(lambda module, args: on_enter(threading.current_thread().name))


def _run(lm: LoadedModel, name: str, is_urgent: bool = False) -> threading.Thread:
    def forward():
        with torch.inference_mode(), (urgent() if is_urgent else contextlib.nullcontext()):
            lm.model(input_ids=_ids())
    thread = threading.Thread(target=forward, name=name, daemon=True)
    thread.start()
    return thread


def test_passes_from_many_threads_never_overlap():
    lm = tiny_llama()
    inside, most = [0], [0]
    guard = threading.Lock()

    def enter(module, args):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.003)          # a pass long enough for another thread to come in, were it let in

    def leave(module, args, output):
        with guard:
            inside[0] -= 1

    lm.model.model.layers[0].register_forward_pre_hook(enter)
    lm.model.model.norm.register_forward_hook(leave)
    threads = [_run(lm, f"t{i}") for i in range(6)]
    for thread in threads:
        thread.join(HANG_GUARD_S)
    assert not any(thread.is_alive() for thread in threads)
    assert most[0] == 1


def test_an_urgent_pass_goes_before_those_that_waited_longer():
    lm = tiny_llama()
    turns = take_turns(lm.model)
    order, release = [], threading.Event()

    def enter(name):
        order.append(name)
        if name == "first":
            release.wait(HANG_GUARD_S)       # hold the turn until all the others wait

    _inside(lm, enter)
    threads = [_run(lm, "first")]
    _wait_for(lambda: order == ["first"])
    for i in range(5):
        threads.append(_run(lm, f"waited longer {i}"))
        _wait_for(lambda i=i: turns.waiting == i + 1)
    threads.append(_run(lm, "urgent", is_urgent=True))
    _wait_for(lambda: turns.waiting == 6)
    release.set()
    for thread in threads:
        thread.join(HANG_GUARD_S)
    assert order[:2] == ["first", "urgent"]
    assert sorted(order[2:]) == [f"waited longer {i}" for i in range(5)]


def test_a_pass_that_fails_gives_its_turn_back():
    lm = tiny_llama()
    with pytest.raises(IndexError), torch.inference_mode():
        lm.model(input_ids=torch.tensor([[lm.facts.vocab_size + 5]]))      # no such token: the embedding raises
    thread = _run(lm, "after")
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive()


def test_turns_are_taken_once_per_model_and_change_no_step():
    lm = tiny_llama()
    hooks = len(lm.model._forward_pre_hooks), len(lm.model._forward_hooks)
    again = LoadedModel.from_parts(lm.model, lm.tokenizer, "tiny-llama")      # as a model moved to a device is
    assert take_turns(again.model) is take_turns(lm.model)
    assert (len(lm.model._forward_pre_hooks), len(lm.model._forward_hooks)) == hooks
    trace = decode(again, "the cat", DecodeConfig(strategy="greedy", max_new_tokens=6))
    out = generate_ids(again, trace.prompt_token_ids, do_sample=False, max_new_tokens=6)
    expected = strip_generated(out[0], len(trace.prompt_token_ids), 0, again.eos_token_ids)
    assert [s.chosen_ids[0] for s in trace.steps] == expected
