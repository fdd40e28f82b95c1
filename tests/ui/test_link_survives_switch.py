"""A shared link's settings survive a switch to another page made before the link's first decode has
ended: the server stops that run before its end (it never gets to remember the address at its end),
and the sidebar menu opens the next page with an empty address.

Reference: the values written into the link below.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.testing.v1 import AppTest

from ui import progress

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
LINK = {"num_beams": "5", "max_new_tokens": "9", "prompt": "A link that was shared"}


@pytest.fixture
def switch_mid_decode(monkeypatch):
    """The first decode drawn is stopped at its second step, as a click in the sidebar menu stops it;
    later decodes run to their end."""
    draw = progress._Watch._draw
    clicks = []
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)

    def clicked(self, fraction, left):
        if sum(self.done) == 2 and not clicks:
            clicks.append(self.name)
            get_script_run_ctx().script_requests.request_stop()
        draw(self, fraction, left)

    monkeypatch.setattr(progress._Watch, "_draw", clicked)
    return clicks


def by_menu(at: AppTest, page: str) -> AppTest:
    """Open `page` from the sidebar menu: the address is emptied."""
    at.query_params.clear()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def test_a_link_survives_a_page_switch_before_its_first_decode_ends(tiny_llama_folder, switch_mid_decode):
    _, folder = tiny_llama_folder
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    for key, value in LINK.items():
        at.query_params[key] = value
    at.switch_page("pages/beam_tree.py").run()             # stopped at its decode's second step
    assert switch_mid_decode == ["beam"] and "beam_trace" not in at.session_state   # the search never finished
    by_menu(at, "compare")
    assert at.sidebar.text_area(key="prompt").value == LINK["prompt"]
    assert at.sidebar.number_input(key="max_new_tokens").value == int(LINK["max_new_tokens"])
    by_menu(at, "beam_tree")
    assert at.slider(key="num_beams").value == int(LINK["num_beams"])
    assert at.sidebar.text_area(key="prompt").value == LINK["prompt"]


def _writes_url():
    from ui.settings import sync_url

    sync_url(strategy="sample", top_p=0.9, chat=True)      # three settings at once
    sync_url(strategy="sample")                            # unchanged: nothing written


def test_settings_written_together_are_one_entry_in_the_browsers_history(monkeypatch):
    """Streamlit's page pushes a browser history entry for every address write, so the browser's Back would
    step through a page's settings one by one: the settings one call writes go in one write."""
    from streamlit.runtime.state.query_params import QueryParams

    writes, send = [], QueryParams._send_query_param_msg
    monkeypatch.setattr(QueryParams, "_send_query_param_msg", lambda self: writes.append(1) or send(self))
    at = AppTest.from_function(_writes_url)
    at.run()
    assert not at.exception, at.exception
    assert len(writes) == 1
    assert (at.query_params["strategy"], at.query_params["top_p"], at.query_params["chat"]) == ("sample", "0.9", "1")


def test_a_run_writes_the_address_once(tiny_llama_folder, monkeypatch):
    """A whole run's settings (presentation mode, the sidebar's, the page's, the step) go into the address in one
    write at its end, so opening a page or changing a setting adds one entry to the browser's history."""
    from streamlit.runtime.state.query_params import QueryParams

    _, folder = tiny_llama_folder
    writes, send = [], QueryParams._send_query_param_msg
    monkeypatch.setattr(QueryParams, "_send_query_param_msg", lambda self: writes.append(dict(self._query_params))
                        or send(self))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.query_params["max_new_tokens"] = "3"
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    assert len(writes) == 1, writes
    assert {"present", "model", "device", "dtype", "prompt", "chat", "seed", "max_new_tokens", "lang", "strategy",
            "top_k", "step"} <= set(writes[0])
    assert (writes[0]["model"], writes[0]["device"], writes[0]["max_new_tokens"], writes[0]["step"]) == (
        folder, "auto", "3", "1")

    writes.clear()
    at.sidebar.number_input(key="seed").set_value(7).run()       # a whole run again
    assert not at.exception, at.exception
    assert len(writes) == 1 and writes[0]["seed"] == "7" and writes[0]["max_new_tokens"] == "3", writes


def test_a_decode_stopped_midway_has_written_the_address_before_its_stop_button(tiny_llama_folder, monkeypatch):
    """The run's one address write comes at its end, and a Stop ends it early: so the settings gathered so far go
    out as the progress box (with Stop) first appears, or a link copied after a Stop would have the old ones."""
    from streamlit.runtime.state.query_params import QueryParams

    _, folder = tiny_llama_folder
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)
    draw = progress._Watch._draw

    def stop_pressed(self, fraction, left):
        if self.box is not None:           # Stop is on screen since the first draw: the reader presses it
            get_script_run_ctx().script_requests.request_stop()
        draw(self, fraction, left)

    monkeypatch.setattr(progress._Watch, "_draw", stop_pressed)
    sent, send = [], QueryParams._send_query_param_msg

    def spy(self):
        send(self)                         # a write Streamlit refused (the run already stopping) raises here
        sent.append(dict(self._query_params))

    monkeypatch.setattr(QueryParams, "_send_query_param_msg", spy)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    for key, value in {**LINK, "prompt": "A prompt no other test decodes"}.items():   # no result kept to reuse
        at.query_params[key] = value
    at.switch_page("pages/beam_tree.py").run()
    assert "beam_trace" not in at.session_state          # the search was stopped
    assert sent, "nothing reached the address"
    assert (sent[-1]["num_beams"], sent[-1]["max_new_tokens"], sent[-1]["model"]) == ("5", "9", folder), sent
    assert {"seed", "chat", "lang", "device", "prompt"} <= set(sent[-1]), sent


def _gathers_then_reruns(rerun_with):
    import streamlit as st

    from ui import settings

    with settings.one_address_write():
        if "again" not in st.session_state:
            st.session_state["again"] = True
            settings.sync_url(seen="1")        # gathered, not yet sent
            getattr(settings, rerun_with)() if rerun_with == "rerun" else st.rerun()
        st.write(f"the address has seen={st.query_params.get('seen')}")


@pytest.mark.parametrize("rerun_with", ["rerun", "st.rerun"])
def test_a_rerun_asked_for_mid_run_starts_from_the_address_gathered_so_far(rerun_with):
    at = AppTest.from_function(_gathers_then_reruns, args=(rerun_with,))
    at.run()
    assert not at.exception, at.exception
    shown = at.markdown[0].value
    if rerun_with == "rerun":           # ui.settings.rerun: what the run gathered reaches the next run
        assert shown == "the address has seen=1", shown
    else:                               # st.rerun alone: the next run starts from the address as last sent
        assert shown == "the address has seen=None", shown
