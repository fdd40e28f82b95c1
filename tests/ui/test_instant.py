"""Pages share one decode service: Compare's batched lanes equal the lanes decoded alone, Beam tree
reuses Compare's search, and Stop keeps the steps decoded so far.

References: each lane decoded alone by the engine on the same weights (no batch, no service),
and transformers' `generate` for the greedy and beam lanes.
"""
from __future__ import annotations

from pathlib import Path

import torch
from streamlit.testing.v1 import AppTest

from engine import decode
from app_helpers import figures
from engine.service import shared_service

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"


def open_compare(folder: str, lanes: list, n: int) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["max_new_tokens"] = n
    at.session_state["cmp_lanes"] = lanes
    at.session_state["cmp_beams"] = 3
    at.session_state["cmp_temperature"] = 1.5
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    return at


def ids(trace) -> list:
    return [s.chosen_ids[0] for s in trace.steps] if trace.config.strategy != "beam" else trace.best.token_ids


def test_compare_lanes_in_one_batch_equal_each_lane_alone(tiny_llama_folder):
    lm, folder = tiny_llama_folder
    at = open_compare(folder, ["greedy", "top_p", "temperature", "soft", "beam"], 6)
    shown = at.session_state["cmp_last_good"]
    assert set(shown) == {"greedy", "top_p", "temperature", "soft", "beam"}
    for lane, trace in shown.items():
        alone = decode(lm, PROMPT, trace.config)          # the engine alone: no batch, no service
        assert ids(trace) == ids(alone), lane
        for a, b in zip(trace.steps, alone.steps):
            assert abs(a.entropy - b.entropy) < 1e-4, lane
    prompt_ids = lm.tokenizer(PROMPT)["input_ids"]
    x = torch.tensor([prompt_ids])
    greedy = lm.model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=6,
                               pad_token_id=lm.model.generation_config.pad_token_id)[0, len(prompt_ids):].tolist()
    assert ids(shown["greedy"]) == greedy[:len(shown["greedy"].steps)]


def test_beam_tree_answers_compares_search_from_memory(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_compare(folder, ["greedy", "beam"], 5)
    beam_lane = at.session_state["cmp_last_good"]["beam"]
    misses = shared_service().misses
    at.session_state["num_beams"] = 3
    at.switch_page("pages/beam_tree.py").run()
    assert not at.exception, at.exception
    assert at.session_state["beam_trace"] is beam_lane      # the very search Compare ran
    assert shared_service().misses == misses                 # nothing decoded again


def test_stop_keeps_the_steps_decoded_so_far_and_decode_all_finishes(tiny_llama_folder, monkeypatch):
    """A click on Stop: Streamlit interrupts the run at the next drawing of the progress box, and the
    button's callback sets the stop flag before the next run. Both are done here by hand."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

    import ui.progress as progress

    _, folder = tiny_llama_folder
    draw = progress._Watch._draw

    def click_stop_at_step_3(self, fraction, left):
        draw(self, fraction, left)
        if sum(self.done) == 3 and self.name == "beam":
            progress.S["_stop_beam"] = True
            raise RerunException(RerunData())

    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(progress._Watch, "_draw", click_stop_at_step_3)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = "Stop me " * 3          # a request no other test has kept
    at.session_state["max_new_tokens"] = 9
    at.session_state["num_beams"] = 2
    at.switch_page("pages/beam_tree.py").run()            # interrupted at step 3
    monkeypatch.setattr(progress._Watch, "_draw", draw)
    at.run()                                               # the run the click on Stop starts
    assert not at.exception, at.exception
    trace = at.session_state["beam_trace"]
    assert len(trace.steps) == 3                              # the three steps done before Stop
    assert any("Stopped" in w.value for w in at.warning)
    assert shared_service().cached(_lm(folder), trace.prompt, trace.config) is None   # not kept for others
    at.slider(key="rerank_lp").set_value(0.5).run()           # other clicks keep the stopped result
    assert at.session_state["beam_trace"] is trace

    at.button(key="_resume_button_beam").click().run()
    assert not at.exception, at.exception
    full = at.session_state["beam_trace"]
    alone = decode(_lm(folder), trace.prompt, trace.config)
    assert len(full.steps) == len(alone.steps) > 3 and full.best.token_ids == alone.best.token_ids
    assert not any("Stopped" in w.value for w in at.warning)


def _lm(folder):
    from ui.shared_model import _models
    return _models()[folder]


def test_a_loaded_model_is_left_out_of_full_garbage_collections(tiny_llama_folder):
    """Streamlit collects garbage in full after every run; the shared model, loaded once, is frozen out
    of those passes, so a click does not walk it again."""
    import gc

    from ui.shared_model import _models

    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    lm = next(lm for key, lm in _models().items() if key.startswith(folder))
    assert gc.get_freeze_count() > 0
    tracked = gc.get_objects()                     # the collector's generations; frozen objects are not in them
    assert not any(obj is lm.model or obj is lm.tokenizer for obj in tracked)
    assert figures(at)                  # the page drew its chart
