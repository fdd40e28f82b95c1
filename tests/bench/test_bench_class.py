"""The class benchmark's protocol parts, against Streamlit's own test harness (no server).

AppTest renders a small page (a segmented control, and a select box and a button inside a
fragment) and builds, in its own code, the widget states a rerun carries after a click or a
choice. The benchmark reads the same element protos out of ForwardMsgs and must build the same
widget states, on the element ids Streamlit made, with the fragment the deltas named.
"""
from __future__ import annotations

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.testing.v1 import AppTest

from bench.bench_class import Screen, choose_then_click, click, read_forward, rerun_msg, segment

FRAGMENT = "fragment-7"


def page():
    import streamlit as st

    st.segmented_control("Strategy", ["greedy", "sample"], key="strategy", default="greedy", format_func=str.title)
    st.button("Compare")                          # no key: the benchmark cannot name it, so it is left out

    @st.fragment
    def panel():
        st.selectbox("Token", ["a", "b", "c"], key="pick", format_func=lambda x: f"token {x}")
        st.button("Next", key="go", disabled=False)

    panel()


def delta(kind: str, proto, fragment_id: str = "") -> ForwardMsg:
    msg = ForwardMsg()
    getattr(msg.delta.new_element, kind).CopyFrom(proto)
    msg.delta.fragment_id = fragment_id
    return msg


def state_of(tree, widget_id: str):
    return next(w for w in tree.get_widget_states().widgets if w.id == widget_id)


def rendered():
    at = AppTest.from_function(page).run()
    screen = Screen(query_string="prompt=hi", page_script_hash="page-1")
    for msg in (delta("button_group", at.segmented_control(key="strategy").proto),
                delta("button", at.button[0].proto),
                delta("selectbox", at.selectbox(key="pick").proto, FRAGMENT),
                delta("button", at.button(key="go").proto, FRAGMENT)):
        assert read_forward(msg, screen) is None
    return at, screen


def test_the_deltas_give_each_keyed_widget_its_id_options_and_fragment():
    at, screen = rendered()
    assert set(screen.widgets) == {"strategy", "pick", "go"}
    assert screen.widgets["go"].id == at.button(key="go").id
    assert screen.widgets["go"].fragment_id == FRAGMENT and screen.widgets["strategy"].fragment_id == ""
    assert screen.widgets["pick"].options == ["token a", "token b", "token c"] == list(at.selectbox(key="pick").options)
    assert screen.widgets["strategy"].options == ["Greedy", "Sample"]


def test_a_click_carries_the_trigger_that_apptest_sends_and_reruns_the_fragment():
    at, screen = rendered()
    back = BackMsg.FromString(click(screen, "go").SerializeToString())
    assert back.WhichOneof("type") == "rerun_script"
    rerun = back.rerun_script
    assert (rerun.fragment_id, rerun.page_script_hash, rerun.query_string) == (FRAGMENT, "page-1", "prompt=hi")
    button = at.button(key="go").click()
    assert list(rerun.widget_states.widgets) == [state_of(button.root, button.id)]


def test_a_choice_and_a_segment_carry_the_values_apptest_sends():
    at, screen = rendered()
    rerun = choose_then_click(screen, "pick", 1, "go").rerun_script
    box = at.selectbox(key="pick").select("b")
    button = at.button(key="go").click()
    assert list(rerun.widget_states.widgets) == [state_of(box.root, box.id), state_of(button.root, button.id)]
    assert rerun.fragment_id == FRAGMENT

    rerun = segment(screen, "strategy", "Sample").rerun_script
    control = at.segmented_control(key="strategy").set_value("sample")
    assert list(rerun.widget_states.widgets) == [state_of(control.root, control.id)]
    assert rerun.fragment_id == ""                # outside the fragment: the whole page reruns


def test_navigation_exceptions_errors_and_the_end_of_a_run_are_read():
    screen = Screen()
    nav = ForwardMsg()
    nav.navigation.page_script_hash = "h-start"
    for path, hash_ in (("", "h-start"), ("step_by_step", "h-step"), ("compare", "h-cmp")):
        page_ = nav.navigation.app_pages.add()
        page_.url_pathname, page_.page_script_hash = path, hash_
    read_forward(nav, screen)
    assert rerun_msg(screen, page="compare").rerun_script.page_script_hash == "h-cmp"
    assert rerun_msg(screen).rerun_script.page_script_hash == "h-start"
    unknown = rerun_msg(screen, page="nowhere").rerun_script       # a page the server has not listed: by its name
    assert (unknown.page_name, unknown.page_script_hash) == ("nowhere", "")

    failed, alert, moved, done = ForwardMsg(), ForwardMsg(), ForwardMsg(), ForwardMsg()
    failed.delta.new_element.exception.type, failed.delta.new_element.exception.message = "ValueError", "bad"
    alert.delta.new_element.alert.format = alert.delta.new_element.alert.ERROR
    alert.delta.new_element.alert.body = "K must be at least 1"
    moved.page_info_changed.query_string = "step=3"
    done.script_finished = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
    assert [read_forward(m, screen) for m in (failed, alert, moved)] == [None, None, None]
    assert read_forward(done, screen) == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
    assert screen.exceptions == ["ValueError: bad"] and screen.error_lines == ["K must be at least 1"]
    assert rerun_msg(screen).rerun_script.query_string == "step=3"


def test_a_rooms_status_gives_the_proxy_and_every_process_to_watch(tmp_path):
    import json

    from bench.bench_class import read_room

    assert read_room(tmp_path) is None                          # no room running there
    (tmp_path / "room.json").write_text(json.dumps({
        "url": "http://localhost:8080", "apps": [{"name": "app1", "pid": 11}, {"name": "app2", "pid": None},
                                                 {"name": "app3", "pid": 13}],
        "model_server": {"url": "http://127.0.0.1:9000", "pid": 20}}))
    room = read_room(tmp_path)
    assert room["url"] == "http://127.0.0.1:8080"                # the websockets go to the proxy's own address
    assert room["pids"] == [11, 13, 20]                          # a process being started again has no id yet
    assert room["model_server"] == "http://127.0.0.1:9000"
    assert read_room(tmp_path / "room.json")["pids"] == [11, 13, 20]
