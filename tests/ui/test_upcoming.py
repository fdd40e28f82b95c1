"""Step by step sends the next step's chart before Next is pressed, and the browser draws it on the press.

What must hold for that to be safe: the figure sent ahead is exactly the one the run that Next starts then
draws (so the press shows the real next step, and that run finds it drawn), it names the figure it follows
(the browser draws it only on top of that one), it is sent again at every run (none left from an earlier
run or from before new settings), and none is sent where the press would bring none: at the end, during Play.
"""
from __future__ import annotations

import json

import torch
from streamlit.runtime.state.common import is_keyed_element_id, user_key_from_element_id

from app_helpers import NEW, PROMPT, open_page


def sent(at) -> tuple:
    """(the chart's data, the data sent ahead of it for Next) of this run."""
    found = {}
    for element in at.main:
        if getattr(element, "type", None) == "bidi_component" and is_keyed_element_id(element.proto.id):
            found[user_key_from_element_id(element.proto.id)] = json.loads(element.proto.json)
    return found["sbs_chart"], found["sbs_chart_next"]


def sent_for_back(at) -> dict:
    for element in at.main:
        if getattr(element, "type", None) == "bidi_component" and is_keyed_element_id(element.proto.id):
            if user_key_from_element_id(element.proto.id) == "sbs_chart_back":
                return json.loads(element.proto.json)
    raise AssertionError("no figure sent ahead for Back")


def title(data) -> str:
    return json.loads(data["figure"])["layout"]["title"]["text"]


def greedy_tokens(lm, n: int) -> list:
    ids = lm.tokenizer(PROMPT)["input_ids"]
    out = lm.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                            do_sample=False, max_new_tokens=n, pad_token_id=lm.model.generation_config.pad_token_id)
    return out[0, len(ids):].tolist()


def test_the_figure_sent_ahead_is_the_one_next_then_draws_until_the_end(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_page(folder, "step_by_step")
    for step in range(2, NEW + 1):
        chart, ahead = sent(at)
        assert ahead["figure"] is not None and ahead["after"] == chart["id"]
        assert (ahead["on"], ahead["key"]) == (".st-key-sbs_next button", "ArrowRight")     # Next, and its key
        assert title(ahead).startswith(f"Step {step}:")
        at.button(key="sbs_next").click().run()
        assert not at.exception, at.exception
        now, _ = sent(at)
        assert (now["figure"], now["id"]) == (ahead["figure"], ahead["id"])     # drawn already: not drawn again
    chart, ahead = sent(at)
    assert ahead["figure"] is None and at.button(key="sbs_next").disabled   # the end: the press brings nothing
    shown = [s.chosen_ids[0] for s in at.session_state["sbs"].steps()]
    assert shown == greedy_tokens(lm, NEW)[:len(shown)]


def test_after_back_the_step_ahead_is_the_one_read_and_new_settings_send_their_own(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "step_by_step")
    for _ in range(3):
        at.button(key="sbs_next").click().run()
    at.button(key="sbs_back").click().run()
    chart, ahead = sent(at)
    assert title(chart).startswith("Step 3:") and title(ahead).startswith("Step 4:")
    at.button(key="sbs_next").click().run()
    assert sent(at)[0]["figure"] == ahead["figure"]
    before = sent(at)
    at.session_state["strategy"] = "sample"            # new settings: a new chart, and what follows it
    at.run()
    chart, ahead = sent(at)
    assert chart["id"] != before[0]["id"] and ahead["after"] == chart["id"]
    assert ahead["figure"] is None or ahead["id"] != before[1]["id"]


def test_nothing_is_sent_ahead_while_play_runs(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "step_by_step")
    at.button(key="sbs_play").click().run()
    assert at.session_state["sbs_playing"]
    assert sent(at)[1]["figure"] is None and sent_for_back(at)["figure"] is None


def test_the_figure_sent_ahead_for_back_is_the_step_before_and_none_on_the_first(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, "step_by_step")
    assert sent_for_back(at)["figure"] is None and at.button(key="sbs_back").disabled     # the first step
    for _ in range(3):
        at.button(key="sbs_next").click().run()
    chart, back = sent(at)[0], sent_for_back(at)
    assert (back["on"], back["key"], back["after"]) == (".st-key-sbs_back button", "ArrowLeft", chart["id"])
    assert title(chart).startswith("Step 4:") and title(back).startswith("Step 3:")
    at.button(key="sbs_back").click().run()
    now = sent(at)[0]
    assert (now["figure"], now["id"]) == (back["figure"], back["id"])


def test_each_steps_figure_is_built_once_and_again_in_another_language(tiny_llama_folder, monkeypatch):
    """A run draws three figures (the step, Next's and Back's sent ahead); two were built by the run before."""
    import figures.candidates

    built, build = [], figures.candidates.candidates_figure
    monkeypatch.setattr(figures.candidates, "candidates_figure",
                        lambda step, *args, **kwargs: built.append(step.index) or build(step, *args, **kwargs))
    _, folder = tiny_llama_folder
    at = open_page(folder, "step_by_step")
    assert sorted(built) == [0, 1]                      # the first step and Next's; no Back on the first step
    for _ in range(3):
        at.button(key="sbs_next").click().run()
    at.button(key="sbs_back").click().run()
    assert sorted(built) == [0, 1, 2, 3, 4]            # each step once, though eight were drawn or sent
    chart, ahead = sent(at)
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception, at.exception
    assert sorted(built) == [0, 1, 1, 2, 2, 3, 3, 4]    # the step on screen, Back's and Next's, in Chinese
    chart_zh, ahead_zh = sent(at)
    assert title(chart).startswith("Step 3:") and title(chart_zh).startswith("第 3 步")
    assert title(ahead_zh).startswith("第 4 步") and chart_zh["id"] != chart["id"]


def test_in_presentation_mode_a_kept_figure_is_enlarged_once(tiny_llama_folder):
    """The figure sent ahead is drawn again by the next run, and kept for the figure export: its text and
    margins grow for the projector once, not at every draw (a figure's top margin is 95 px, or 125 with a
    second legend row, times 1.2)."""
    _, folder = tiny_llama_folder
    at = open_page(folder, "step_by_step")
    at.query_params["present"] = "1"
    at.run()
    for _ in range(3):
        chart, ahead = sent(at)
        drawn = [json.loads(data["figure"])["layout"] for data in (chart, ahead)]
        kept = [fig.to_dict()["layout"] for key, (_, _, fig) in at.session_state["sbs_figures"].items()
                if key[-1]]                 # kept for presentation mode (the last part of the key)
        for layout in drawn + kept:
            assert layout["font"]["size"] == 17 and layout["margin"]["t"] in (round(95 * 1.2), round(125 * 1.2))
        at.button(key="sbs_next").click().run()
        assert not at.exception, at.exception
