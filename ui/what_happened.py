"""The "What happened?" panel: a run's findings as a clickable timeline, and a greedy replay.

`render_what_happened(trace, key_prefix)` draws the panel and returns the step index
(0-based) whose button was clicked on this run, else None; the page moves its cursor there.
Steps are shown 1-based, like the step-by-step slider. `flagged_steps(trace)` gives the
steps the coloured text can outline. The findings come from engine.explain.findings, recomputed
from the steps (findings stored in an uploaded file are not trusted).

The replay runs two greedy decodes with the run's own tokens forced:
  - "without the pick": steps before k forced, greedy chooses at k and after;
  - "keeping the pick": steps 0..k forced, greedy after.
If the loop appears with the pick and not without it, the pick led to it; if both loop,
the loop would have come anyway; if neither, later sampling (not this pick) made it.
"""
from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from engine import FEEDBACK_STRATEGIES, DecodeScopeError, LoadedModel, Trace
from engine.explain.findings import findings_of as _findings_of
from engine.explain.findings import replay_greedy, replay_summary, timeline
from engine.explain.findings import flagged_steps as _flagged
from figures.labels import for_markdown, visible
from figures.served import served_facts
from ui.file_text import isolated
from ui.engine_words import engine_text
from ui.i18n import t

REPLAY_KINDS = ("low_prob", "departure", "loop", "entropy_jump")
FINDINGS_KEPT = 16     # findings kept per session: a few branches at a few lengths


def findings_of(trace) -> dict:
    """engine.explain.findings's findings, computed once per (branch, length): a Next or a Back that shows the same
    steps again reads them from the session. The steps' choices and entropies identify the run."""
    key = (trace.model, trace.prompt, trace.config,
           tuple((tuple(s.chosen_ids), s.entropy) for s in trace.steps),
           tuple(tuple(q.token_ids) for q in trace.sequences), len(trace.nodes))
    memo = st.session_state.setdefault("_findings", {})
    if key not in memo:
        memo[key] = _findings_of(trace)
        while len(memo) > FINDINGS_KEPT:
            memo.pop(next(iter(memo)))
    return memo[key]


def flagged_steps(trace, sequence: int = 0) -> set:
    """0-based steps the coloured text should outline: picks, the departure, entropy events, the loop start."""
    if not trace.sequences:
        return set()
    return _flagged(findings_of(trace), sequence)


def render_what_happened(trace: Trace, key_prefix: str, lm: LoadedModel | None = None) -> int | None:
    """Draw the panel for `trace`; return the 0-based step whose jump button was clicked, else None.

    lm: the model for the replay; by default the shared model named by the trace.
    """
    st.subheader(t("explain.title"))
    if not trace.sequences or not trace.steps:
        st.caption(t("explain.empty"))
        return None
    findings = findings_of(trace)
    sequence = 0
    if len(trace.sequences) > 1:
        names = {i: t("explain.sequence_label", n=i + 1) for i in range(len(trace.sequences))}   # this run's language
        sequence = st.selectbox(t("explain.sequence"), list(names), format_func=names.get,
                                key=f"{key_prefix}_sequence")
    found = findings["sequences"][sequence]
    events = timeline(findings, sequence)
    st.caption(_summary(found, findings))

    jump = None
    rows = _by_step(events)
    if not rows:
        st.success(t("explain.nothing"))
    else:
        jump = _timeline(rows, f"{key_prefix}_timeline", findings["strategy"])

    with st.expander(t("explain.rule_title"), icon=":material/help:"):
        rule = findings["rule"]
        st.markdown(t("explain.rule", threshold=rule["threshold"], max_rank=rule["max_rank"],
                      min_n=rule["min_n"], max_n=rule["max_n"], repeats=rule["min_repeats"],
                      window=rule["entropy_window"], history=rule["entropy_min_history"],
                      ratio=rule["entropy_ratio"], delta=rule["entropy_delta"]))
        if trace.nodes:
            st.caption(t("explain.rule_beam"))

    _replay_section(trace, sequence, found, events, key_prefix, lm)
    return jump


# ---- the timeline ----------------------------------------------------------------------
def _summary(found: dict, findings: dict) -> str:
    parts = [t("explain.summary_picks", n=len(found["low_prob_picks"]))]
    if found["loop"] is not None:
        parts.append(t("explain.summary_loop", step=found["loop"]["start"] + 1))
    if found["greedy_departure"] is not None:
        parts.append(t("explain.summary_departure", step=found["greedy_departure"]["step"] + 1))
    elif findings["strategy"] != "greedy":
        parts.append(t("explain.summary_on_greedy"))
    parts.append(t("explain.summary_entropy", n=len(found["entropy_events"])))
    return " · ".join(parts)


def _token(text: str | None) -> str:
    return f"**{for_markdown(visible(text or ''))}**"


def _by_step(events: list) -> list:
    """The timeline grouped into rows: one per step, its events in timeline order."""
    rows = []
    for event in events:
        if rows and rows[-1][0]["step"] == event["step"]:
            rows[-1].append(event)
        else:
            rows.append([event])
    return rows


def _timeline(rows: list, key: str, strategy: str) -> int | None:
    """The timeline as one table, a row per step; selecting a row returns its step (once per selection).

    One table instead of a row of widgets per step: a long run's timeline is one element, not hundreds."""
    S = st.session_state
    table = pd.DataFrame([{
        t("explain.col_step"): t("explain.step_button", step=events[0]["step"] + 1),
        t("explain.col_token"): visible(events[0]["text"] or ""),
        t("explain.col_what"): "\n".join(_plain(_what(e)) for e in events),
        t("explain.col_why"): "\n".join(_why(e, strategy) for e in events)} for events in rows])
    st.caption(t("explain.timeline_help"))
    event = st.dataframe(table, key=key, on_select="rerun", selection_mode="single-row", hide_index=True,
                         width="stretch")
    picked = list(event.selection.rows) if event is not None else []
    steps = tuple(r[0]["step"] for r in rows)
    if not picked:
        S.pop(f"{key}_used", None)
        return None
    if S.get(f"{key}_used") == (picked[0], steps) or not 0 <= picked[0] < len(rows):
        return None           # a selection moves the cursor once; the user may move on from there
    S[f"{key}_used"] = (picked[0], steps)
    return rows[picked[0]][0]["step"]


def _why(event: dict, strategy: str) -> str:
    """Why an event matters. An unlikely token is explained by what put it there: the user forcing it,
    a model unsure even of its top choice, the beam search keeping the whole hypothesis, or a random draw;
    blaming sampling for a token the user forced (or greedy took) would teach the wrong lesson."""
    kind = event["kind"]
    if kind != "low_prob":
        return t(f"explain.why_{kind}")
    if event.get("forced"):
        return t("explain.why_low_prob_forced")
    if strategy == "beam":
        return t("explain.why_low_prob_beam")
    if strategy in ("greedy", "soft") or event.get("rank") == 1:      # the strategy's own favourite
        return t("explain.why_low_prob_top")
    return t("explain.why_low_prob")


def _plain(markdown: str) -> str:
    """Text written for st.markdown, for a table cell: no bold marks, no escapes."""
    return re.sub(r"\\(.)", r"\1", markdown.replace("**", ""))


def _what(event: dict) -> str:
    kind = event["kind"]
    if kind == "departure":
        if event.get("mixture"):
            return t("explain.what_departure_mixture")
        if event.get("unknown"):
            return t("explain.what_departure_unknown")
        key = "explain.what_departure_forced" if event["forced"] else "explain.what_departure"
        return t(key, argmax=for_markdown(visible(event["argmax_text"] or "")),
                 p=_p(event["argmax_prob"]))
    if kind == "low_prob":
        if event["rank"] is None:
            return t("explain.what_low_prob_norank", p=_p(event["prob"]))
        mass = event["mass_above"]
        text = t("explain.what_low_prob", p=_p(event["prob"]), rank=event["rank"],
                 mass=f"{'≥ ' if not event['mass_above_exact'] else ''}{mass:.0%}")
        return text + (" " + t("explain.forced") if event.get("forced") else "")
    if kind == "loop":
        return t("explain.what_loop", span=_token("".join(event["texts"])), repeats=event["repeats"], n=event["n"],
                 end=event["end"])
    text = t(f"explain.what_{kind}", h=f"{event['entropy']:.2f}", m=f"{event['median']:.2f}")
    return text + (t("explain.streak", steps=event["steps"]) if event["steps"] > 1 else "")


def _p(value) -> str:
    return "?" if value is None else f"{value:.4f}"


# ---- replay from a flagged step --------------------------------------------------------
def _replay_section(trace: Trace, sequence: int, found: dict, events: list, key_prefix: str,
                    lm: LoadedModel | None) -> None:
    S = st.session_state
    candidates = sorted({e["step"] for e in events if e["kind"] in REPLAY_KINDS})
    if not candidates or served_facts(trace) is not None:      # a replay needs the model's weights
        return
    st.markdown(f"**{t('explain.replay_title')}**")
    loop = found["loop"]
    # only speak of a loop when one was flagged; else the replays show what the pick changed
    st.caption(t("explain.replay_intro" if loop is not None else "explain.replay_intro_no_loop"))
    # default: the last unlikely pick before the loop's first copy ends (a pick inside that copy shaped the
    # repeated phrase), else the first flagged step
    picks = [p["step"] for p in found["low_prob_picks"] if loop is None or p["step"] < loop["start"] + loop["n"]]
    default = picks[-1] if picks else candidates[0]
    cols = st.columns([2, 2, 3], vertical_alignment="bottom")
    step_names = {s: t("explain.step_button", step=s + 1) for s in candidates}     # in this run's language
    step = cols[0].selectbox(t("explain.replay_step"), candidates, index=candidates.index(default),
                             format_func=step_names.get, key=f"{key_prefix}_replay_step")
    ids = tuple(trace.sequences[sequence].token_ids)
    identity = (trace.model, trace.prompt, ids, trace.config, sequence, step)
    result_key = f"{key_prefix}_replay"
    if cols[1].button(t("explain.replay_button"), key=f"{key_prefix}_replay_go", icon="↩️", width="stretch"):
        from ui.limits import prompt_problem

        # a file's prompt passes the limits a typed one does, before any forward pass
        problem = prompt_problem(trace.prompt, tokens=len(trace.prompt_token_ids))
        model = None if problem else lm if lm is not None else _shared_model(trace.model)
        if problem:
            st.error(for_markdown(problem))
        if model is not None:
            try:
                with st.spinner(t("explain.replay_running")):
                    without = replay_greedy(model, trace, step, sequence, keep_pick=False)
                    kept = replay_greedy(model, trace, step, sequence, keep_pick=True)
                S[result_key] = {"identity": identity,
                                 "without": replay_summary(trace, without, step, sequence),
                                 "kept": replay_summary(trace, kept, step, sequence)}
            except DecodeScopeError as exc:
                st.error(engine_text(exc))
    if trace.config.strategy in FEEDBACK_STRATEGIES:
        st.caption(t("explain.replay_soft"))
    result = S.get(result_key)
    if isinstance(result, dict) and result.get("identity") == identity:
        _replay_result(loop, result["without"], result["kept"], step)


def _shared_model(name: str):
    """The model a recorded trace names, only when it is the model this user chose: a file must
    never make the server fetch or load a model (nor push another user's model out of memory)."""
    from ui.shared_model import get_lm, model_key

    chosen = model_key(st.session_state.get("model", ""))
    if model_key(name) != chosen:
        st.error(for_markdown(t("explain.replay_other_model", model=isolated(name), chosen=chosen)))
        return None
    lm = get_lm(chosen)
    return lm if lm is not None and lm.name == model_key(name) else None


def _replay_result(loop, without: dict, kept: dict, step: int) -> None:
    rows = (("replay_without", without), ("replay_kept", kept))
    for key, summary in rows:
        found = summary["loop"]
        state = (t("explain.replay_loops", step=found["start"] + 1) if found is not None
                 else t("explain.replay_no_loop"))
        if summary["parts_at"] is not None:
            state += t("explain.replay_parts", step=summary["parts_at"] + 1)
        text = summary["text"][:200].replace("\r\n", "\n").replace("\n", " ⏎ ")
        st.markdown(f"- **{t('explain.' + key, step=step + 1)}**: {state}  \n{for_markdown(text)}")
    verdict = _verdict(loop is not None, without["loop"] is not None, kept["loop"] is not None)
    st.info(t(f"explain.verdict_{verdict}", step=step + 1))


def _verdict(original: bool, without: bool, kept: bool) -> str:
    """Which of the stories the three runs tell (original, pick replaced, pick kept)."""
    if not original:
        return "no_loop" if not (without or kept) else "greedy_loops"
    if kept and not without:
        return "pick_caused"
    if without:
        return "anyway"
    return "later_sampling"
