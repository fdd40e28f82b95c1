"""One forward pass at a time through a loaded model, the reader's own first.

The app's server runs each session in a thread of one process, and every session shares the loaded
model. Thirty sessions each running a forward pass at once do not finish sooner than thirty passes
one after another: on a CPU, much of a small model's pass is Python, which one thread runs at a time,
so the passes only slow each other down, and a student's Next, which needs a few milliseconds of
Python to send its chart, waits behind all of them (measured with bench/bench_class.py: 30 students,
the chart's p95 went from 3.3 s to 0.11 s once passes took turns, at two thirds of the CPU per click).

So each model lets one pass in at a time. A pass a reader is waiting for (on Step by step: the next
step, the step decoded ahead for the next Next, a new branch's step, the first step) is `urgent`: it
goes before the waiting passes of long jobs (a decode replayed under new settings, Compare's lanes),
which take their turns in between.

The turn is taken by a forward pre-hook and given back by a forward hook that runs even when the pass
raises an Exception (`always_call`), so every caller, `generate` included, takes turns. A pass is the
innermost thing a thread waits for (it takes no other lock), so turns cannot deadlock.
"""
from __future__ import annotations

import contextlib
import threading

import torch

_local = threading.local()


class Turns:
    """A lock in which urgent waiters go first."""

    def __init__(self):
        self._changed = threading.Condition()
        self._busy = False
        self._urgent_waiting = 0
        self.waiting = 0               # passes waiting for their turn now

    def take(self) -> None:
        urgent = getattr(_local, "urgent", 0) > 0
        with self._changed:
            self._urgent_waiting += urgent
            self.waiting += 1
            try:
                while self._busy or (not urgent and self._urgent_waiting):
                    self._changed.wait()
            finally:
                self._urgent_waiting -= urgent
                self.waiting -= 1
            self._busy = True

    def give(self) -> None:
        with self._changed:
            self._busy = False
            self._changed.notify_all()


def take_turns(model: torch.nn.Module) -> Turns:
    """Make every forward pass through `model` take its turn (once per model; returns its Turns)."""
    turns = getattr(model, "_decodescope_turns", None)
    if turns is None:
        turns = Turns()
        model.register_forward_pre_hook(lambda module, args: turns.take())
        model.register_forward_hook(lambda module, args, output: turns.give(), always_call=True)
        model._decodescope_turns = turns
    return turns


@contextlib.contextmanager
def urgent():
    """The forward passes this thread runs inside go before those of threads not inside one."""
    _local.urgent = getattr(_local, "urgent", 0) + 1
    try:
        yield
    finally:
        _local.urgent -= 1
