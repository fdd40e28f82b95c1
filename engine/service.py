"""One decode service for every page and every session: each result is computed once.

Results are kept by what determines them: the model, the prompt, the whole DecodeConfig and
any forced tokens. The store is bounded in bytes (an estimate of each trace's size), evicts
the least recently used first, and is safe to share between threads (Streamlit runs each
session in its own thread). Two callers that ask for the same result at once share one
computation: the second waits for the first, and is told so through `on_wait`.

A decode that is stopped early (its `on_step` returned False) is returned but not kept,
since it is not the result of its request.
"""
from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, fields, is_dataclass
from typing import Callable

from .config import DecodeConfig
from engine.decoding.lanes import LaneBatch
from .model import LoadedModel
from .strategies import make_runner
from .trace import Step, Trace

DEFAULT_MAX_BYTES = 256 * 2**20
CANDIDATE_BYTES = 320      # a Candidate record with its strings, as Python objects (measured with tracemalloc)
NODE_BYTES = 400
STEP_BYTES = 1500

OnStep = Callable[[int, Step], bool | None]   # (lane, step) -> False stops the decode


def trace_bytes(trace: Trace) -> int:
    """A size estimate of a trace in memory, for the byte bound."""
    candidates = sum(len(s.candidates) for s in trace.steps)
    return STEP_BYTES * len(trace.steps) + CANDIDATE_BYTES * candidates + NODE_BYTES * len(trace.nodes)


def result_bytes(value, depth: int = 0) -> int:
    """A size estimate of any result kept in the store: traces by `trace_bytes`, tensors and arrays by their
    bytes, containers and dataclasses by their parts (one level of records deep enough for our results)."""
    if isinstance(value, Trace):
        return trace_bytes(value)
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes + 100
    if depth > 4:
        return sys.getsizeof(value)
    if isinstance(value, dict):
        return 64 + sum(result_bytes(k, depth + 1) + result_bytes(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return 56 + sum(result_bytes(v, depth + 1) for v in value)
    if is_dataclass(value):
        return 56 + sum(result_bytes(getattr(value, f.name), depth + 1) for f in fields(value))
    return sys.getsizeof(value)


def request_key(lm: LoadedModel, prompt: str, config: DecodeConfig, forced: dict | None = None,
                draft_lm: LoadedModel | None = None) -> tuple:
    key = (lm.name, lm.facts, prompt, config, tuple(sorted((forced or {}).items())))
    return key + ((draft_lm.name, draft_lm.facts),) if draft_lm is not None else key


@dataclass
class _Pending:
    done: threading.Event
    value: object = None           # the owner's complete result; None if it stopped early
    error: BaseException | None = None


class DecodeService:
    """decode / decode_lanes answered from memory when the same request was made before."""

    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = int(max_bytes if max_bytes is not None
                             else os.environ.get("DECODESCOPE_RESULT_CACHE_BYTES", DEFAULT_MAX_BYTES))
        self._lock = threading.Lock()
        self._store: OrderedDict[tuple, tuple[Trace, int]] = OrderedDict()
        self._pending: dict[tuple, _Pending] = {}
        self.bytes = 0
        self.hits = self.misses = self.waits = 0

    # ---- the store ---------------------------------------------------------------
    def cached(self, lm: LoadedModel, prompt: str, config: DecodeConfig, forced: dict | None = None,
               draft_lm: LoadedModel | None = None) -> Trace | None:
        """The kept result for this request, or None; never computes."""
        with self._lock:
            return self._get(request_key(lm, prompt, config, forced, draft_lm))

    def _get(self, key) -> Trace | None:
        entry = self._store.get(key)
        if entry is None:
            return None
        self._store.move_to_end(key)
        return entry[0]

    def _hit(self, key):
        """The value kept under `key`, counted as a hit; None when there is none."""
        with self._lock:
            value = self._get(key)
            if value is not None:
                self.hits += 1
            return value

    def _put(self, key, trace: Trace, size: int | None = None) -> None:
        size = trace_bytes(trace) if size is None else size
        with self._lock:
            if size > self.max_bytes:
                return
            if key in self._store:
                self.bytes -= self._store.pop(key)[1]
            self._store[key] = (trace, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._store.popitem(last=False)
                self.bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._store.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._store)

    # ---- computing once ------------------------------------------------------------
    def _once(self, key, compute: Callable[[], tuple[object, bool]], on_wait: Callable[[], None] | None):
        """Run compute() -> (value, complete) once per key across threads. A caller that finds the
        key in flight waits and gets the same value; None if the owner stopped early (retry then)."""
        with self._lock:
            pending = self._pending.get(key)
            owner = pending is None
            if owner:
                pending = self._pending[key] = _Pending(threading.Event())
            else:
                self.waits += 1
        if not owner:
            if on_wait is not None:
                on_wait()
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value
        try:
            value, complete = compute()
            if complete:
                pending.value = value
            return value
        except BaseException as exc:
            pending.error = exc
            raise
        finally:
            with self._lock:
                self._pending.pop(key, None)
            pending.done.set()

    # ---- any other result a page computes from the model ------------------------------
    def remember(self, key: tuple, compute: Callable[[], object]):
        """compute()'s value, kept under `key` beside the traces (same byte bound, same least-recently-used
        order) and computed once however many sessions ask at once: for the results that are not one decode
        (teacher forcing's scores, a soft lane with its projections, a sweep). `key` must name everything the
        value depends on, the model included; the value is shared, so callers only read it."""
        key = ("remembered",) + tuple(key)
        value = self._hit(key)
        if value is not None:
            return value

        def compute_and_keep():
            with self._lock:
                self.misses += 1
            value = compute()
            if value is not None:
                self._put(key, value, result_bytes(value))
            return value, True

        return self._once(key, compute_and_keep, None)

    # ---- one decode ----------------------------------------------------------------
    def decode(self, lm: LoadedModel, prompt: str, config: DecodeConfig, forced: dict | None = None,
               on_step: OnStep | None = None, on_wait: Callable[[], None] | None = None,
               draft_lm: LoadedModel | None = None) -> Trace:
        """The Trace of this request: from memory, from the same computation running for another
        caller, or computed now. `on_step` sees each new step (False stops; a stopped trace is not kept).
        draft_lm: the second model of a speculative 'model:NAME' draft."""
        key = request_key(lm, prompt, config, forced, draft_lm)
        while True:
            trace = self._hit(key)
            if trace is not None:
                return trace

            def compute():
                with self._lock:
                    self.misses += 1
                runner = make_runner(lm, prompt, config, forced, draft_lm)
                going = True
                while going and not runner.finished:
                    seen = len(runner.steps)
                    runner.step()
                    for step in runner.steps[seen:]:     # one step per call; a speculative round adds several
                        if on_step is not None and on_step(0, step) is False:
                            going = False
                            break
                trace = runner.trace()
                if runner.finished:
                    self._put(key, trace)
                return trace, runner.finished

            trace = self._once(key, compute, on_wait)
            if trace is not None:
                return trace

    # ---- lanes in one batch ------------------------------------------------------------
    def decode_lanes(self, lm: LoadedModel, prompt: str, configs: list[DecodeConfig],
                     on_step: OnStep | None = None, on_wait: Callable[[], None] | None = None) -> list[Trace]:
        """One Trace per config. Lanes already kept are answered from memory; the rest run as one batch,
        and each is kept under its own request, so a later single decode of that lane is a hit."""
        keys = [request_key(lm, prompt, c) for c in configs]
        while True:
            with self._lock:
                traces = [self._get(k) for k in keys]
                self.hits += sum(t is not None for t in traces)
            todo = [i for i, t in enumerate(traces) if t is None]
            if not todo:
                return traces

            def compute(todo=todo, traces=traces):
                with self._lock:
                    self.misses += len(todo)
                batch = LaneBatch(lm, prompt, [configs[i] for i in todo])
                relay = None if on_step is None else (lambda lane, step: on_step(todo[lane], step))
                while batch.step(relay):
                    pass
                out = list(traces)
                for i, lane, trace in zip(todo, batch.lanes, batch.traces()):
                    out[i] = trace
                    if lane.finished:
                        self._put(keys[i], trace)
                return out, batch.finished

            result = self._once(("lanes",) + tuple(keys), compute, on_wait)
            if result is not None:
                return result


_SHARED: DecodeService | None = None
_SHARED_LOCK = threading.Lock()


def shared_service() -> DecodeService:
    """The one service of this process (every page and session of a server share it)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = DecodeService()
        return _SHARED
