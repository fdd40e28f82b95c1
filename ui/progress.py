"""Decodes through the shared service, with progress a user can watch and a Stop button.

Every page asks `engine.service.shared_service()` for its decodes, so a result computed by one
page or one session is answered from memory for the next. While a decode runs, each new step
is shown as it is decoded: a bar, the estimated time left, the text so far (lane by lane, beam
step by beam step), and a Stop button. Nothing is drawn for a decode answered from memory or
one that finishes within about a second.

Streamlit's own Stop (the toolbar's) is passed on to the decode's Stop button (STOP_BRIDGE).

Stop, or any other click, makes Streamlit start a new run of the page at once, in a new thread,
while the old run goes on decoding until its next element update, where Streamlit stops it (and
stops it again at every later update). So the old run's decode is told to stop twice: by the Stop
button's callback, which runs first in the new run, and by the interruption inside `on_step`. The
old run hands the steps decoded so far to the new run, which waits for them (this session's own
decode, never "another session") before it asks the service for anything. When the click was Stop,
the page shows the kept steps until the settings change or the user continues.
"""
from __future__ import annotations

import contextlib
import itertools
import threading
import time
from dataclasses import dataclass, field

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException, StopException

from engine import DecodeConfig, LoadedModel, Trace
from engine.decoding.prefill import PREFILL_TOKENS, watching_prompts
from engine.service import request_key, shared_service
from figures.labels import for_markdown, visible
from ui.i18n import t
from ui.settings import rerun, send_gathered

S = st.session_state
SHOW_AFTER_SECONDS = 1.0        # a decode expected to finish sooner draws nothing
LET_GO_SECONDS = 30.0           # the longest a run waits for an earlier run to let go of its decode (one step)
_FLIGHTS = "_decodes_in_flight"
REDRAW_SECONDS = 0.1            # the progress is redrawn at most this often (each redraw is a message to the browser)
_BUTTONS = itertools.count()    # one run may not show one widget key twice
# Streamlit's own Stop (the toolbar's, the one users see first) ends a run at its next element update, and no run
# follows it: the progress box stayed frozen, and the steps decoded so far showed only after the next click. While
# a decode's Stop button is on the page, a press on Streamlit's Stop presses that button instead, which stops the
# decode and starts the run that shows its steps (the same as the page's own Stop). Installed once per page;
# a stop that still comes through is handled in on_step and _keep_partials alike.
STOP_BRIDGE = """<script>
if (!window.__dsStopBridge) {
  window.__dsStopBridge = true;
  document.addEventListener("click", (event) => {
    const pressed = event.target.closest ? event.target.closest('[data-testid="stStatusWidget"] button') : null;
    const app = document.querySelector('[data-testid="stApp"]');
    if (!pressed || !app || app.getAttribute("data-test-script-state") !== "running") return;
    const own = [...document.querySelectorAll('[class*="st-key-_stop_button_"] button')].pop();
    if (!own) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    own.click();
  }, true);
}
</script>"""


@dataclass
class _Flight:
    """A decode some run of this session has under way: `stop` asks it to end at its next step, `done`
    says it has ended. A run that Streamlit has stopped may not read or write session state any more
    (each access raises again), so its steps are handed over here, and the next run keeps them."""
    name: str
    keys: tuple
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    partial: list | None = None                   # the traces of a decode that ended early
    waiting: bool = False                         # waiting for another session's decode of the same request
    stopped: bool = False                         # Streamlit's own Stop ended the run (see STOP_BRIDGE)


def _stop(name: str) -> None:
    """Stop's callback: runs first in the run the click starts, while the old run may still be decoding."""
    S[f"_stop_{name}"] = True
    for flight in S.get(_FLIGHTS, ()):
        flight.stop.set()


def _let_go() -> None:
    """Wait until the decodes of this session's earlier runs have ended (each within a step of being told).
    Streamlit starts a new run while the old one still decodes; the new run's request would otherwise
    find the old decode in the service and wait on it as on another session's, and Stop's steps, kept
    only when the old decode ends, would not be there yet."""
    busy = [f for f in S.get(_FLIGHTS, []) if not f.done.is_set()]
    for flight in busy:
        flight.stop.set()
    if any(not f.waiting for f in busy):         # a run only waiting for another session's result holds nothing
        with st.spinner(t("common.letting_go")):
            for flight in busy:
                if not flight.waiting:
                    flight.done.wait(LET_GO_SECONDS)
    _keep_partials()


def _keep_partials() -> None:
    """Keep the steps of this session's decodes that ended early, and forget the decodes that ended."""
    flights = S.get(_FLIGHTS, [])
    for flight in flights:
        if flight.done.is_set() and flight.partial is not None:
            S[f"_partial_{flight.name}"] = (flight.keys, flight.partial)
            if flight.stopped:                    # kept as the page's own Stop keeps it
                S[f"_stop_{flight.name}"] = True
    S[_FLIGHTS] = [f for f in flights if not f.done.is_set()]


@dataclass
class _Watch:
    """Progress of one decode request (one or several lanes) drawn into one placeholder."""
    name: str
    labels: list
    totals: list                                  # steps each lane may take at most
    stoppable: bool = True
    started: float = field(default_factory=time.perf_counter)
    done: list = field(default_factory=list)      # steps decoded per lane
    texts: list = field(default_factory=list)     # the text so far per lane
    box: object = None
    lines: object = None                          # the bar and the text so far, redrawn; Stop is not
    drawn_at: float = 0.0
    notice: object = None                         # "another session is decoding this", while it is
    draws: int = 0
    interrupted: ScriptControlException | None = None
    flight: _Flight | None = None

    def __post_init__(self):
        self.done = [0] * len(self.labels)
        self.texts = [""] * len(self.labels)

    def waiting(self) -> None:
        """The service waits for the same decode running for another session: say so until it ends."""
        self.flight.waiting = True
        self.notice = st.empty()
        self.notice.info(t("common.waiting_other_session"), icon="⏳")

    def on_step(self, lane: int, step) -> bool:
        self.flight.waiting = False
        if self.flight.stop.is_set():             # Stop, or a newer run of this session, wants it to end
            return False
        self.done[lane] += 1
        self.texts[lane] += "".join(step.chosen_texts[:1])
        elapsed = time.perf_counter() - self.started
        made, total = sum(self.done), max(sum(self.totals), 1)
        left = elapsed / made * max(total - made, 0)
        if self.box is None and elapsed + left < SHOW_AFTER_SECONDS:
            return True
        try:
            self._draw(made / total, left)
        except ScriptControlException as exc:     # Stop (or another click) interrupts this run
            self.interrupted = exc
            self.flight.stopped = isinstance(exc, StopException)
            return False
        return not self.flight.stop.is_set()      # a redraw may be skipped: Stop still ends the decode here

    def on_prompt(self, read: int, total: int) -> None:
        """A long prompt is being read (engine.decoding.prefill), before the first step: the same box, its bar
        counting the prompt's tokens. Stop here is kept and ends the decode at its first step."""
        self.flight.waiting = False
        if self.interrupted is not None or self.flight.stop.is_set():
            return
        try:
            self._draw(read / total, reading=reading_text(read, total, self.started))
        except ScriptControlException as exc:     # Stop (or another click) interrupts this run
            self.interrupted = exc
            self.flight.stopped = isinstance(exc, StopException)
            self.flight.stop.set()

    def _draw(self, fraction: float, left: float = 0.0, reading: str | None = None) -> None:
        now = time.perf_counter()
        if self.box is None:
            send_gathered()       # the address this run has written so far goes out before its Stop button does
            self._clear_notice()
            self.box = st.empty()
            with self.box.container(border=True):
                st.html(STOP_BRIDGE, unsafe_allow_javascript=True)
                self.lines = st.empty()
                if self.stoppable:   # drawn once: a button redrawn at every step could move under the pointer
                    st.button(t("common.stop"), key=f"_stop_button_{self.name}_{next(_BUTTONS)}", icon="⏹",
                              on_click=_stop, args=(self.name,))
        elif now - self.drawn_at < REDRAW_SECONDS and fraction < 1.0:
            return
        self.drawn_at = now
        self.draws += 1
        with self.lines.container():
            if reading is not None:
                st.progress(min(fraction, 1.0), text=reading)
                return
            st.progress(min(fraction, 1.0), text=t("common.decoding_progress", percent=f"{fraction:.0%}",
                                                   left=f"{left:.0f}"))
            for label, text, done, total in zip(self.labels, self.texts, self.done, self.totals):
                st.markdown(f"**{for_markdown(label)}** · {done}/{total} · {for_markdown(visible(text))}")

    def _clear_notice(self) -> None:
        if self.notice is not None:
            self.notice.empty()
            self.notice = None

    def clear(self) -> None:
        """Take the progress (and any notice) off the page; not after an interruption, since Streamlit
        stops an interrupted run again at its every element update."""
        if self.interrupted is None:
            self._clear_notice()
            if self.box is not None:
                self.box.empty()


def _watched(name: str, keys: tuple, labels: list, totals: list, stoppable: bool, run) -> list:
    """Run `run(on_step, on_wait)` -> (traces, complete) unless Stop kept a partial result for these keys."""
    _let_go()
    stop = S.pop(f"_stop_{name}", False)
    partial = S.get(f"_partial_{name}")
    if partial is not None and partial[0] == keys and (stop or S.get(f"_held_{name}") == keys):
        S[f"_held_{name}"] = keys
        return partial[1]
    S.pop(f"_held_{name}", None)
    S.pop(f"_partial_{name}", None)
    watch = _Watch(name, labels, totals, stoppable, flight=_Flight(name, keys))
    S[_FLIGHTS] = [*S.get(_FLIGHTS, []), watch.flight]
    try:
        with watching_prompts(watch.on_prompt):
            traces, complete = run(watch.on_step, watch.waiting)
        if not complete and stoppable:           # handed over without session state: see _Flight
            watch.flight.partial = traces
    finally:
        watch.flight.done.set()
        watch.clear()
    if watch.interrupted is not None:
        raise watch.interrupted
    _keep_partials()
    return traces


def reading_text(read: int, total: int, started: float) -> str:
    """The bar's words while a prompt of `total` tokens is read: the time left once a part has been read."""
    if read <= 0:
        return t("common.reading_prompt_start", total=f"{total:,}", part=f"{PREFILL_TOKENS:,}")
    left = (time.perf_counter() - started) / read * max(total - read, 0)
    return t("common.reading_prompt", read=f"{read:,}", total=f"{total:,}", left=f"{left:.0f}")


@contextlib.contextmanager
def prompt_progress():
    """A bar while a long prompt is read inside the block, for a decode that draws no progress box of its own
    (Step by step's first step, a replay under new settings). Streamlit's own Stop ends the run at a redraw."""
    slot, started = None, time.perf_counter()

    def on_part(read: int, total: int) -> None:
        nonlocal slot
        if slot is None:
            slot = st.empty()
        slot.progress(read / total, text=reading_text(read, total, started))

    try:
        with watching_prompts(on_part):
            yield
    except ScriptControlException:      # Streamlit stops an interrupted run again at its every element update
        slot = None
        raise
    finally:
        if slot is not None:
            slot.empty()


def held(name: str) -> bool:
    """Whether the result shown under `name` is one Stop cut short."""
    return S.get(f"_held_{name}") is not None


def watched_decode(name: str, lm: LoadedModel, prompt: str, config: DecodeConfig, label: str,
                   forced: dict | None = None, stoppable: bool = True, draft_lm: LoadedModel | None = None) -> Trace:
    """service.decode with progress and Stop; after Stop, the steps decoded so far (a shorter trace)."""
    service = shared_service()

    def run(on_step, on_wait):
        trace = service.decode(lm, prompt, config, forced, on_step=on_step, on_wait=on_wait, draft_lm=draft_lm)
        return [trace], service.cached(lm, prompt, config, forced, draft_lm) is trace

    return _watched(name, (request_key(lm, prompt, config, forced, draft_lm),), [label], [config.max_new_tokens],
                    stoppable, run)[0]


def watched_lanes(name: str, lm: LoadedModel, prompt: str, configs: list, labels: list) -> list:
    """service.decode_lanes with progress (lane by lane) and Stop; one Trace per config."""
    service = shared_service()

    def run(on_step, on_wait):
        traces = service.decode_lanes(lm, prompt, configs, on_step=on_step, on_wait=on_wait)
        return traces, all(service.cached(lm, prompt, c) is tr for c, tr in zip(configs, traces))

    return _watched(name, tuple(request_key(lm, prompt, c) for c in configs), list(labels),
                    [c.max_new_tokens for c in configs], True, run)


def watched_steps(name: str, keys: tuple, labels: list, totals: list, run) -> list:
    """Any computation that steps lanes and reports each step, with the same progress and Stop: `run(on_step,
    on_wait)` -> (results, complete); after Stop, the results so far (kept for these `keys`)."""
    return _watched(name, keys, list(labels), list(totals), True, run)


def watched_served(name: str, server, prompt: str, config: DecodeConfig, label: str) -> Trace:
    """A decode on a served model (engine.served.decode) with the same progress and Stop: the tokens stream
    in, and Stop keeps the steps received so far (the connection is closed; the server stops too)."""
    from engine.served.decode import served_decode

    def run(on_step, on_wait):
        stopped = []

        def relay(lane, step):
            going = on_step(lane, step)
            if going is False:
                stopped.append(True)
            return going

        trace = served_decode(server, prompt, config, on_step=relay)
        return [trace], not stopped

    keys = ("served", server.url, server.model, prompt, config)
    return _watched(name, (keys,), [label], [config.max_new_tokens], True, run)[0]


def stopped_note(name: str) -> None:
    """Under a result that Stop cut short: say so, and offer to decode the rest."""
    if not held(name):
        return
    cols = st.columns([4, 1])
    cols[0].warning(t("common.stopped_note"), icon="⏹")
    if cols[1].button(t("common.resume"), key=f"_resume_button_{name}", icon="▶"):
        S.pop(f"_held_{name}", None)
        S.pop(f"_partial_{name}", None)
        rerun()
