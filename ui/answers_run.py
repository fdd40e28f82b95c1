"""Whole answers' run on a page: the tree grown with a progress bar, and kept when the run is stopped.

Any click (the Stop button, Streamlit's own Stop, or a setting changed) makes Streamlit end the page's run at its next
element update, here the progress bar's. The tree's progress callback catches that, lets the search end where it
is, keeps the tree so far under the session's id (the stopped run may no longer touch session state) and lets
the stop go on. Streamlit starts the next run at once, in another thread, while the old one is still in a
forward pass: the next run first asks the old one to end and waits for it (`let_go`), then shows the kept tree,
said to be stopped, until the settings change. A press on Streamlit's own Stop presses the page's Stop instead
(ui.progress.STOP_BRIDGE), so it shows the tree so far too. The Stop button goes when the run ends.

The same model, prompt and settings give the same exact tree and the same seeded samples, so a finished run is
shared by every session of the server (`shared_run`, a few runs kept, the least recently used going first): a
class that opens the same page computes it once, and a session that asks while another computes it waits for
that one. A new run draws its tree as soon as it is grown (`on_tree`), while greedy, the beams and the samples run.
The server computes the default page's run itself once its first model has loaded (`warm_default`, started by
ui.serve), so the first visitor of the page finds it finished too.
"""
from __future__ import annotations

import threading
import time

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from collections import OrderedDict

from engine.answers import Distribution, TreeSettings
from engine.answers.run import AnswersRun, explore
from engine.answers.stops import PRESETS
from figures.labels import for_markdown, visible
from ui.i18n import t
from ui.progress import STOP_BRIDGE
from engine import LoadedModel

_KEPT: dict = {}          # session id -> (identity, the run stopped early)
_FLIGHTS: dict = {}       # session id -> (stop, done): the search a run of this session has under way
LET_GO_SECONDS = 30.0     # the longest a run waits for an earlier one to end (one batched pass)
MAX_KEPT = 64             # sessions whose stopped run is kept (the oldest goes first)
REDRAW_SECONDS = 0.5      # the ledger so far is redrawn at most this often
_LOCK = threading.Lock()
_SHARED: OrderedDict = OrderedDict()     # identity -> a finished run, shared by every session
_UNDER_WAY: dict = {}                     # identity -> the _UnderWay of the session (or server) computing it
MAX_SHARED = 16                           # finished runs kept for every session
MAX_SHARED_NODES = 200_000                # ... holding at most this many tree nodes together (a few tens of MB)
WAIT_POLL_SECONDS = 0.25                  # a waiting session updates the page this often (a click can end it)


class _UnderWay:
    """A run being computed for every session: `done` is set when it ends; `tree` holds its tree once grown, so
    that a session waiting for it draws the tree as the computing one does, before the samples are drawn."""

    def __init__(self):
        self.done = threading.Event()
        self.tree = None


def request(depth: int, budget: int, branch: int, kind: str, temperature: float, top_p: float, beams,
            stops: tuple) -> tuple:
    """(the tree's settings, the beam widths) from the page's controls: built in one place, so that the page and
    the server's own run of the defaults (`warm_default`) ask for the same run."""
    dist = Distribution(kind, temperature, 0, top_p) if kind == "sampler" else Distribution()
    widths = tuple(sorted(int(b) for b in beams))
    return TreeSettings(depth=depth, budget=budget, branch=branch, batch=16, distribution=dist, stops=stops), widths


def identity_of(lm: LoadedModel, prompt: str, chat: bool, tree_settings, widths: tuple, samples: int,
                seed: int) -> tuple:
    """What a run is shared under: everything its tree, landings and samples depend on."""
    return lm.name, lm.facts, prompt, chat, tree_settings, widths, samples, seed


def warm_default(lm: LoadedModel, prompt: str) -> AnswersRun | None:
    """The run the page opens with on its default settings (the landing prompt, chat off), computed without a
    page and shared: the first visitor's tree was drawn 7.3 s after the address was opened, a later visitor's 3.0 s
    (bench/bench_answers_open.py). Its passes take their turns behind a reader's (engine.model.turns). Nothing
    happens when a session computes or has computed it already; None then."""
    from ui.settings import TABLE

    default = {name: setting.default for name, setting in TABLE.items()}
    tree_settings, widths = request(default["wa_depth"], default["wa_budget"], default["wa_branch"],
                                    default["wa_dist"], default["wa_temperature"], default["wa_top_p"],
                                    default["wa_beams"], PRESETS[default["wa_stops"]])
    chat = bool(default["chat"]) and lm.facts.has_chat_template
    identity = identity_of(lm, prompt, chat, tree_settings, widths, default["wa_samples"], default["seed"])
    mine = _UnderWay()
    with _LOCK:
        if identity in _SHARED or identity in _UNDER_WAY:
            return None
        _UNDER_WAY[identity] = mine
    try:
        run = explore(lm, prompt, tree_settings, chat=chat, beams=(1, *widths), samples=default["wa_samples"],
                      seed=default["seed"], on_tree=lambda tree: setattr(mine, "tree", tree))
        _share(identity, run)
        return run
    finally:
        with _LOCK:
            if _UNDER_WAY.get(identity) is mine:
                del _UNDER_WAY[identity]
        mine.done.set()


def shared_run(identity: tuple, on_tree=None) -> AnswersRun | None:
    """A finished run of these settings from any session, waiting first for one under way in another session
    (None if there is none, or if that one was stopped). on_tree(tree): draws that run's tree once it is grown,
    while its samples are still drawn."""
    with _LOCK:
        under_way = _UNDER_WAY.get(identity)
    if under_way is not None:
        note, drawn = st.empty(), False
        while not under_way.done.wait(WAIT_POLL_SECONDS):
            if on_tree is not None and not drawn and under_way.tree is not None:
                on_tree(under_way.tree)
                drawn = True
            note.caption(t("answers_end.same_run_elsewhere"))        # an element update: a click ends the wait
        note.empty()
    with _LOCK:
        run = _SHARED.get(identity)
        if run is not None:
            _SHARED.move_to_end(identity)
    return run


def _share(identity: tuple, run: AnswersRun) -> None:
    with _LOCK:
        _SHARED[identity] = run
        _SHARED.move_to_end(identity)
        while len(_SHARED) > MAX_SHARED or (len(_SHARED) > 1 and _nodes_held() > MAX_SHARED_NODES):
            _SHARED.popitem(last=False)


def _nodes_held() -> int:
    return sum(len(r.tree.nodes) for r in _SHARED.values())


def _session() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def kept(identity: tuple) -> AnswersRun | None:
    """The run a stop left for these settings in this session, if any (an earlier run still searching is
    asked to end first, and waited for)."""
    let_go()
    with _LOCK:
        entry = _KEPT.get(_session())
    return entry[1] if entry is not None and entry[0] == identity else None


def let_go() -> None:
    """End this session's search still under way in an earlier run, and wait until it has kept its tree."""
    with _LOCK:
        flight = _FLIGHTS.get(_session())
    if flight is not None:
        flight[0].set()
        flight[1].wait(LET_GO_SECONDS)


def explore_watched(lm: LoadedModel, prompt: str, settings, chat: bool, beams, samples: int, seed: int,
                    identity: tuple, on_tree=None) -> AnswersRun:
    """explore() with a progress bar, the ledger so far and a Stop button; a stop keeps the tree so far (see the
    module's docstring). The ledger line stays on screen when Streamlit's own Stop ends the run.
    on_tree(tree): draws the grown tree while the strategies and samples run."""
    session = _session()
    # the bar, the ledger so far and Stop in one placeholder, emptied when the run ends (no row is left over)
    holder = st.empty()
    with holder.container():
        bar = st.progress(0.0, text=t("answers.growing"))
        live = st.empty()
        # a click stops the run; Streamlit's own Stop is passed on to this button (ui.progress.STOP_BRIDGE)
        st.button(t("answers.stop"), key="_stop_button_answers", icon="⏹️", help=t("answers.stop_help"))
        st.html(STOP_BRIDGE, unsafe_allow_javascript=True)
    interrupted: list = []
    drawn = [0.0]
    stop, mine = threading.Event(), _UnderWay()
    done = mine.done
    with _LOCK:
        _FLIGHTS[session] = (stop, done)
        under_way = _UNDER_WAY.setdefault(identity, mine)

    def progress(fraction: float, line: str, snapshot) -> None:
        if interrupted:
            return
        try:
            bar.progress(min(fraction, 1.0), text=t("answers.growing_n", line=line))
            if time.monotonic() - drawn[0] >= REDRAW_SECONDS:
                drawn[0] = time.monotonic()
                live.markdown(so_far(snapshot()))
        except ScriptControlException as exc:
            interrupted.append(exc)

    def phase(name: str) -> None:
        if interrupted:
            return
        try:
            bar.progress(1.0, text=t(f"answers_end.phase_{name}"))
        except ScriptControlException as exc:
            interrupted.append(exc)

    def grown(tree) -> None:
        mine.tree = tree                          # for the sessions waiting for this run (shared_run)
        if interrupted:
            return
        try:
            live.empty()
            if on_tree is not None:
                on_tree(tree)
        except ScriptControlException as exc:
            interrupted.append(exc)

    try:
        run = explore(lm, prompt, settings, chat=chat, beams=beams, samples=samples, seed=seed,
                      should_stop=lambda: bool(interrupted) or stop.is_set(), progress=progress, on_tree=grown,
                      on_phase=phase)
        if not run.tree.stopped:
            _share(identity, run)
        with _LOCK:
            _KEPT.pop(session, None)
            if run.tree.stopped:
                while len(_KEPT) >= MAX_KEPT:
                    _KEPT.pop(next(iter(_KEPT)))
                _KEPT[session] = (identity, run)
    finally:
        with _LOCK:
            if _FLIGHTS.get(session) == (stop, done):
                del _FLIGHTS[session]
            if under_way is mine:
                del _UNDER_WAY[identity]
        done.set()
    if interrupted:
        raise interrupted[0]
    holder.empty()
    return run


def so_far(tree) -> str:
    """One line: the ledger of the tree so far and its most likely answer."""
    led = tree.ledger
    best = tree.answers[0] if tree.answers else None
    text = (for_markdown(visible(best.text)) if best.text else t("answers.empty")) if best else "–"
    return t("answers.so_far", answers=f"{led.answers:.3g}", prefixes=f"{led.prefixes:.3g}",
             left=f"{led.left_out:.3g}", best=text, p=f"{best.prob:.3g}" if best else "–")
