"""The state behind the Step-by-step page: decodes in progress, a cursor, and branches.

No Streamlit here: a Stepper lives in st.session_state and the page calls its methods.
Each branch is a `forced` dict (step -> token id); its Decoder keeps the KV cache, so
Next on the newest step is exactly one forward pass. Going Back only moves the cursor.
A new branch starts from its parent's state at the branch step (KV cache, generator), so it
costs one forward pass. When the settings change, the branches are kept; each is replayed
under the new config only when the new settings could change the steps it has taken
(a branch is reproducible from config + forced).

Streamlit's fast reruns start a new run of the page while the previous one may still be
decoding (it stops only at its next Streamlit call), so two threads can work on the same
Stepper. Every change holds the stepper's lock: the new run waits for the old change to
finish instead of replacing runners under it (that race once left the cursor past the
decoded steps: an empty text with Back enabled).

After a step is drawn, the page asks for the step after it on a copy of the decode (`look_ahead`), so the
next Next takes that copy and only moves the cursor: the forward pass happened while the reader was reading.
The copy is the decode's own state (KV cache and generator), so the step is the one Next would have decoded;
any other change (new settings, a reset, a step taken another way) leaves it unused. `upcoming` names the
step the next Next will show when it is ready, so that the page can hand the browser its figure beforehand.
The step decoded ahead, Next's own step, a new branch's step and the first step are urgent passes
(engine.model.turns): on a model many sessions share, they go before the passes of long jobs (a replay under
new settings, Compare's lanes).

Every session that opens the same prompt under the same settings starts on the same first
step, so the first step is decoded once per server: later openings start from a copy of it
(its KV cache and generator state) instead of running the prompt's forward pass again.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from engine.config import DecodeConfig
from engine.decoding.decoder import Decoder
from engine.model import LoadedModel, urgent
from engine.decoding.runner import Runner
from engine.strategies import make_runner
from engine.trace import Trace

OPENINGS_MAX_BYTES = 64 * 2**20     # KV cache kept for first steps, all prompts together


class _Openings:
    """First steps already decoded, by (model, prompt, settings); the least recently used go first."""

    def __init__(self, max_bytes: int = OPENINGS_MAX_BYTES):
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict = OrderedDict()      # key -> (model, decoder at its first step, bytes)

    @staticmethod
    def key(lm: LoadedModel, prompt: str, config: DecodeConfig) -> tuple:
        return id(lm), prompt, config, tuple(lm.eos_token_ids)

    def start(self, lm: LoadedModel, prompt: str, config: DecodeConfig) -> Decoder | None:
        """A decode standing on its first step, copied from one kept for these inputs; None if none is."""
        with self._lock:
            kept = self._kept.get(self.key(lm, prompt, config))
            if kept is None or kept[0] is not lm:
                return None
            self._kept.move_to_end(self.key(lm, prompt, config))
        return kept[1].copy()

    def keep(self, lm: LoadedModel, prompt: str, config: DecodeConfig, runner: Runner) -> None:
        if not isinstance(runner, Decoder) or len(runner.steps) != 1 or runner.cache_bytes > self.max_bytes:
            return                        # (a long prompt's cache is not copied only to be dropped)
        first = runner.copy()
        if first is None:
            return
        size = first.cache_bytes
        with self._lock:
            self._kept[self.key(lm, prompt, config)] = (lm, first, size)
            while sum(entry[2] for entry in self._kept.values()) > self.max_bytes:
                self._kept.popitem(last=False)

    def forget(self, lm: LoadedModel) -> None:
        """Drop the first steps of a model the server no longer holds (they would keep it in memory)."""
        with self._lock:
            for key in [k for k, entry in self._kept.items() if entry[0] is lm]:
                del self._kept[key]


OPENINGS = _Openings()


@dataclass
class Branch:
    forced: dict                       # step index -> token id
    runner: Runner | None = field(default=None, repr=False)   # built on demand by make_runner
    # a copy of `runner` one step further (look_ahead), valid while `runner` is the same object at the same length
    ahead: Decoder | None = field(default=None, repr=False)
    ahead_of: tuple = field(default=(None, -1), repr=False)   # (runner, its length) when the copy was made

    def ahead_fits(self) -> bool:
        """Whether the looked-ahead copy was made from the branch's decode as it is now."""
        run, length = self.ahead_of
        return self.ahead is not None and run is self.runner and length == len(self.runner.steps)

    def drop_ahead(self) -> None:
        self.ahead, self.ahead_of = None, (None, -1)

    def take_ahead(self) -> bool:
        """Make the looked-ahead copy the branch's decode, when it fits; the copy is gone either way."""
        usable = self.ahead_fits()
        if usable:
            self.runner = self.ahead
        self.drop_ahead()
        return usable

    @property
    def part_step(self) -> int | None:
        """The step where this branch leaves the main line (its first forced token)."""
        return min(self.forced) if self.forced else None


def _locked(method):
    """Run a Stepper method holding the stepper's lock (re-entrant: methods call each other)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return run


class Stepper:
    """Decodes one prompt step by step, with branches; or replays a recorded trace (no model)."""

    def __init__(self, lm: LoadedModel | None, prompt: str, config: DecodeConfig, recorded: Trace | None = None):
        self.lm, self.prompt, self.config, self.recorded = lm, prompt, config, recorded
        self._lock = threading.RLock()
        self.branches = [Branch(forced={})]
        self.active = 0
        self.cursor = 0
        if recorded is None:
            self._open()

    def _open(self) -> None:
        """Stand on the first step: a copy of one another session decoded, or a fresh forward pass."""
        self.branches[0].runner = OPENINGS.start(self.lm, self.prompt, self.config)
        if self.branches[0].runner is None:
            with urgent():                # the reader waits for it
                self.ensure(1)
            OPENINGS.keep(self.lm, self.prompt, self.config, self.branches[0].runner)

    @classmethod
    def viewing(cls, trace: Trace) -> "Stepper":
        return cls(None, trace.prompt, trace.config, recorded=trace)

    # ---- runs ------------------------------------------------------------------
    @_locked
    def runner(self, index: int | None = None) -> Runner:
        branch = self.branches[self.active if index is None else index]
        if branch.runner is None:
            branch.runner = make_runner(self.lm, self.prompt, self.config, forced=branch.forced)
        return branch.runner

    def steps(self, index: int | None = None) -> list:
        if self.recorded is not None:
            return self.recorded.steps
        return self.runner(index).steps

    def finished(self, index: int | None = None) -> bool:
        if self.recorded is not None:
            return True
        return self.runner(index).finished

    @_locked
    def ensure(self, n: int, index: int | None = None) -> None:
        """Decode until the branch has n steps (or has ended)."""
        if self.recorded is not None:
            return
        run = self.runner(index)
        while len(run.steps) < n and not run.finished:
            run.step()

    @_locked
    def trace(self, index: int | None = None) -> Trace:
        if self.recorded is not None:
            return self.recorded
        return self.runner(index).trace()

    @property
    def can_branch(self) -> bool:
        return self.recorded is None and self.config.strategy != "beam"

    @property
    def current(self):
        """The Step under the cursor."""
        steps = self.steps()
        return steps[min(self.cursor, len(steps) - 1)] if steps else None

    # ---- moving ------------------------------------------------------------------
    @_locked
    def next(self) -> bool:
        """Move one step forward; a forward pass only when the cursor is on the newest step."""
        if self.cursor + 1 < len(self.steps()):
            self.cursor += 1
            return True
        if self.finished():
            return False
        if not self.branches[self.active].take_ahead():
            with urgent():
                self.runner().step()
        self.cursor = len(self.steps()) - 1
        return True

    @_locked
    def look_ahead(self) -> bool:
        """Decode the step after the newest one on a copy of the active branch, for the next Next to take.
        Only for a live decode with the cursor on its newest step, not ended, that can be copied; the copies of
        other branches are dropped (one extra KV cache per session at most). Whether a step is ready."""
        if self.recorded is not None:
            return False
        branch, run = self.branches[self.active], self.runner()
        if branch.ahead_fits():
            return True
        if isinstance(run, Decoder) and not run.finished and self.cursor + 1 == len(run.steps):
            ahead = run.copy()
            with urgent():            # the next Next waits for it
                stepped = ahead is not None and ahead.step() is not None
            if stepped:
                for other in self.branches:
                    other.drop_ahead()
                branch.ahead, branch.ahead_of = ahead, (run, len(run.steps))
                return True
        return False

    @_locked
    def upcoming(self):
        """The Step that Next would show, when showing it needs no forward pass: the next step already decoded,
        or the looked-ahead copy's. None at the end, or where Next would decode. The page sends its figure to the
        browser ahead of time, to draw the moment Next is pressed."""
        steps = self.steps()
        if self.cursor + 1 < len(steps):
            return steps[self.cursor + 1]
        branch = self.branches[self.active] if self.recorded is None else None
        if branch is not None and branch.ahead_fits() and len(branch.ahead.steps) > len(steps):
            return branch.ahead.steps[len(steps)]
        return None

    @_locked
    def back(self) -> None:
        self.cursor = max(0, self.cursor - 1)

    @_locked
    def go(self, step: int) -> None:
        self.ensure(step + 1)
        self.cursor = max(0, min(step, len(self.steps()) - 1))

    @_locked
    def reset(self) -> None:
        """Start the decode over: drop the branches and the caches."""
        self.branches = [Branch(forced={})]
        self.active = 0
        self.cursor = 0
        self._open()

    @_locked
    def reconfigure(self, config: DecodeConfig) -> None:
        """New strategy settings: keep the branches and the cursor, replay each under the new config."""
        if config == self.config:
            return
        self.config = config
        for branch in self.branches:      # a copy decoded ahead under the old settings
            branch.drop_ahead()
        if config.strategy == "beam":
            self.branches = [Branch(forced={})]
            self.active = 0
        lengths = [len(b.runner.steps) if b.runner is not None else 0 for b in self.branches]
        for branch in self.branches:     # a runner whose steps cannot change keeps them (no replay)
            if not (isinstance(branch.runner, Decoder) and branch.runner.retarget(config)):
                branch.runner = None
        self.ensure(self.cursor + 1)
        self.cursor = min(self.cursor, len(self.steps()) - 1)
        # the other branches are shown beside the active one: each is replayed as far as it had gone,
        # or it would show no text at all
        for index, length in enumerate(lengths):
            if index != self.active:
                self.ensure(length, index)

    # ---- branches ------------------------------------------------------------------
    @_locked
    def branch(self, token_id: int) -> int:
        """Force token_id at the cursor's step and continue from there; returns the branch index.

        If that token was already chosen here, nothing changes. An identical branch is reused."""
        step = self.current
        if step is None or not self.can_branch or step.chosen_ids[0] == token_id:
            return self.active
        at = step.index
        forced = {k: v for k, v in self.branches[self.active].forced.items() if k < at}
        forced[at] = int(token_id)
        for i, existing in enumerate(self.branches):
            if existing.forced == forced:
                self.active = i
                break
        else:     # the new branch starts from the parent's state at this step: no replay of the prefix
            parent = self.branches[self.active].runner
            runner = parent.fork(at, token_id) if isinstance(parent, Decoder) else None
            self.branches.append(Branch(forced=forced, runner=runner))
            self.active = len(self.branches) - 1
        with urgent():                 # the branch's own step, which the reader waits for
            self.ensure(at + 1)
        self.cursor = at
        return self.active

    @_locked
    def switch(self, index: int) -> None:
        """Show another branch; the cursor stays on the same step where that branch has it."""
        self.active = max(0, min(index, len(self.branches) - 1))
        self.ensure(self.cursor + 1)
        self.cursor = min(self.cursor, len(self.steps()) - 1)
