"""The "What happened?" panel in AppTest, on hand-made traces (no model needed).

The script builds a trace with a 0.005 pick at step 3 (shown as "Step 4") and a loop
from step 7, draws the panel, and records the step it returns in session state.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def panel_script(root: str, kind: str, lang: str, with_model: bool = False, prompt_bytes: int = 0):
    """Runs inside AppTest: imports happen here because the function's source is run on its own."""
    import streamlit as st
    from trace_builders import loop_trace, make_step, quiet_trace

    from ui.what_happened import flagged_steps, render_what_happened

    st.session_state.setdefault("lang", lang)
    trace = quiet_trace() if kind in ("quiet", "pick") else loop_trace()
    if kind in ("loop", "pick"):      # step 3 picks w13 at 0.005 (rank 4, 0.95 ranked above)
        trace.steps[3] = make_step(3, [(1, 0.6), (2, 0.3), (3, 0.05), (13, 0.005)], chosen=13)
    if prompt_bytes:                  # a file's prompt, as long as the file likes
        import dataclasses

        trace = dataclasses.replace(trace, prompt="é" * (prompt_bytes // 2))
    st.session_state["flagged"] = sorted(flagged_steps(trace))
    lm = None
    if with_model:
        from tiny_models import tiny_llama

        lm = tiny_llama()
    jump = render_what_happened(trace, key_prefix="wh", lm=lm)
    if jump is not None:
        st.session_state["jumped"] = jump


def app(kind: str = "loop", lang: str = "en", with_model: bool = False, prompt_bytes: int = 0) -> AppTest:
    at = AppTest.from_function(panel_script, kwargs=dict(root=str(ROOT), kind=kind, lang=lang, with_model=with_model,
                                                         prompt_bytes=prompt_bytes), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def texts(lang: str) -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / "explain.json").read_text(encoding="utf-8"))


def select_row(at: AppTest, row: int) -> None:
    """What a click on a timeline row does: the table's selection state names that row."""
    at.session_state["wh_timeline"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception


def test_timeline_rows_and_jump():
    at = app()
    en = texts("en")
    assert at.subheader[0].value == en["title"]
    assert len(at.dataframe) == 1                 # one table, not a widget per row
    table = at.dataframe[0].value
    # one row per step: the departure and the pick at step 3 (shown 4), the loop at step 7 (shown 8)
    assert list(table[en["col_step"]]) == ["Step 4", "Step 8"]
    assert [b.label for b in at.button][0] == en["replay_button"]
    assert at.session_state["flagged"] == [3, 7]
    select_row(at, 1)
    assert at.session_state["jumped"] == 7
    del at.session_state["jumped"]
    at.run()                                      # the same selection on the next run: no second jump
    assert "jumped" not in at.session_state
    shown = "\n".join(table[en["col_what"]])
    assert "p = 0.0050, rank 4; tokens ranked above held 95%" in shown
    assert "repeats 3× back to back (n = 2), through step 13" in shown
    assert "Leaves the greedy path: greedy takes" in shown
    assert "**" not in shown and "\\" not in shown       # plain text in the cells


def test_no_events_says_so():
    at = app("quiet")
    assert [s.value for s in at.success] == [texts("en")["nothing"]]
    assert not at.dataframe


def test_replay_speaks_of_a_loop_only_when_one_was_flagged():
    en = texts("en")
    with_loop = [c.value for c in app().caption]
    assert en["replay_intro"] in with_loop
    pick_only = [c.value for c in app("pick").caption]       # an unlikely pick, eight distinct tokens: no loop
    assert en["replay_intro_no_loop"] in pick_only
    assert not any("loop" in c for c in pick_only if c.startswith("Runs greedy"))


def test_chinese():
    at = app(lang="zh")
    zh = texts("zh")
    assert at.subheader[0].value == zh["title"]
    assert list(at.dataframe[0].value[zh["col_step"]]) == ["第 4 步", "第 8 步"]
    assert at.button[0].label == zh["replay_button"]


def test_replay_runs_both_greedy_decodes_and_gives_a_verdict():
    at = app(with_model=True)
    en = texts("en")
    assert at.selectbox[0].value == 3          # the last unlikely pick before the loop's first copy ends
    next(b for b in at.button if b.label == en["replay_button"]).click().run()
    assert not at.exception, at.exception
    result = at.session_state["wh_replay"]
    without, kept = result["without"], result["kept"]
    # without the pick greedy chooses at step 3; keeping it, the first four tokens are the run's own
    assert kept["token_ids"][:4] == [10, 11, 12, 13] and without["token_ids"][:3] == [10, 11, 12]
    shown = "\n".join(m.value for m in at.markdown)
    assert en["replay_without"].format(step=4) in shown and en["replay_kept"].format(step=4) in shown
    verdicts = {en[k].format(step=4) for k in en if k.startswith("verdict_")}
    assert len(at.info) == 1 and at.info[0].value in verdicts


def test_replay_of_a_prompt_over_the_limits_is_refused_before_any_forward_pass(monkeypatch):
    from ui import what_happened
    from ui.limits import PROMPT_LIMIT_BYTES

    ran = []
    monkeypatch.setattr(what_happened, "replay_greedy", lambda *args, **kwargs: ran.append(args))
    at = app(with_model=True, prompt_bytes=PROMPT_LIMIT_BYTES + 2)
    next(b for b in at.button if b.label == texts("en")["replay_button"]).click().run()
    assert not at.exception, at.exception
    assert not ran and "wh_replay" not in at.session_state
    assert len(at.error) == 1 and f"{PROMPT_LIMIT_BYTES + 2:,} bytes" in at.error[0].value, [e.value for e in at.error]


@pytest.mark.parametrize("original, without, kept, verdict", [
    (True, False, True, "pick_caused"),       # the loop comes with the pick only
    (True, True, True, "anyway"),             # greedy loops without the pick as well
    (True, True, False, "anyway"),
    (True, False, False, "later_sampling"),   # neither replay loops: later draws did it
    (False, False, False, "no_loop"),
    (False, True, False, "greedy_loops"),
])
def test_verdicts(original, without, kept, verdict):
    from ui.what_happened import _verdict

    assert _verdict(original, without, kept) == verdict
