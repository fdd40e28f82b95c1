"""Decodes through the shared service, with progress a user can watch and a Stop button.

Every page asks `engine.service.shared_service()` for its decodes, so a result computed by one
page or one session is answered from memory for the next. While a decode runs, each new step
is shown as it is decoded: a bar, the estimated time left, the text so far (lane by lane, beam
step by beam step), and a Stop button. Nothing is drawn for a decode answered from memory or
one that finishes within about a second.

Stop, or any other click, makes Streamlit interrupt this run at its next element update; that
happens inside `on_step`, so the engine is told to stop (the step returns False) and the steps
decoded so far are kept for this session before the interruption goes on. When the click was
Stop, the page shows the kept steps until the settings change or the user continues.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from engine import DecodeConfig, LoadedModel, Trace
from engine.service import request_key, shared_service
from figures.labels import for_markdown, visible
from ui.i18n import t

S = st.session_state
SHOW_AFTER_SECONDS = 1.0        # a decode expected to finish sooner draws nothing


def _stop(name: str) -> None:
    S[f"_stop_{name}"] = True


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
    draws: int = 0
    interrupted: ScriptControlException | None = None

    def __post_init__(self):
        self.done = [0] * len(self.labels)
        self.texts = [""] * len(self.labels)

    def on_step(self, lane: int, step) -> bool:
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
            return False
        return True

    def _draw(self, fraction: float, left: float) -> None:
        if self.box is None:
            self.box = st.empty()
        self.draws += 1
        with self.box.container(border=True):
            st.progress(min(fraction, 1.0), text=t("common.decoding_progress", percent=f"{fraction:.0%}",
                                                   left=f"{left:.0f}"))
            for label, text, done, total in zip(self.labels, self.texts, self.done, self.totals):
                st.markdown(f"**{for_markdown(label)}** · {done}/{total} · {for_markdown(visible(text))}")
            if self.stoppable:       # a new key per drawing: one run may not show one key twice
                st.button(t("common.stop"), key=f"_stop_button_{self.name}_{self.draws}", icon="⏹",
                          on_click=_stop, args=(self.name,))


def _waiting() -> None:
    st.info(t("common.waiting_other_session"), icon="⏳")


def _watched(name: str, keys: tuple, labels: list, totals: list, stoppable: bool, run) -> list:
    """Run `run(on_step)` -> (traces, complete) unless Stop kept a partial result for these keys."""
    stop = S.pop(f"_stop_{name}", False)
    partial = S.get(f"_partial_{name}")
    if partial is not None and partial[0] == keys and (stop or S.get(f"_held_{name}") == keys):
        S[f"_held_{name}"] = keys
        return partial[1]
    S.pop(f"_held_{name}", None)
    S.pop(f"_partial_{name}", None)
    watch = _Watch(name, labels, totals, stoppable)
    traces, complete = run(watch.on_step)
    if watch.box is not None:
        watch.box.empty()
    if not complete and stoppable:
        S[f"_partial_{name}"] = (keys, traces)
    if watch.interrupted is not None:
        raise watch.interrupted
    return traces


def watched_decode(name: str, lm: LoadedModel, prompt: str, config: DecodeConfig, label: str,
                   forced: dict | None = None, stoppable: bool = True) -> Trace:
    """service.decode with progress and Stop; after Stop, the steps decoded so far (a shorter trace)."""
    service = shared_service()

    def run(on_step):
        trace = service.decode(lm, prompt, config, forced, on_step=on_step, on_wait=_waiting)
        return [trace], service.cached(lm, prompt, config, forced) is trace

    return _watched(name, (request_key(lm, prompt, config, forced),), [label], [config.max_new_tokens],
                    stoppable, run)[0]


def watched_lanes(name: str, lm: LoadedModel, prompt: str, configs: list, labels: list) -> list:
    """service.decode_lanes with progress (lane by lane) and Stop; one Trace per config."""
    service = shared_service()

    def run(on_step):
        traces = service.decode_lanes(lm, prompt, configs, on_step=on_step, on_wait=_waiting)
        return traces, all(service.cached(lm, prompt, c) is tr for c, tr in zip(configs, traces))

    return _watched(name, tuple(request_key(lm, prompt, c) for c in configs), list(labels),
                    [c.max_new_tokens for c in configs], True, run)


def watched_served(name: str, server, prompt: str, config: DecodeConfig, label: str) -> Trace:
    """A decode on a served model (engine.served.decode) with the same progress and Stop: the tokens stream
    in, and Stop keeps the steps received so far (the connection is closed; the server stops too)."""
    from engine.served.decode import served_decode

    def run(on_step):
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
    if S.get(f"_held_{name}") is None:
        return
    cols = st.columns([4, 1])
    cols[0].warning(t("common.stopped_note"), icon="⏹")
    if cols[1].button(t("common.resume"), key=f"_resume_button_{name}", icon="▶"):
        S.pop(f"_held_{name}", None)
        S.pop(f"_partial_{name}", None)
        st.rerun()
