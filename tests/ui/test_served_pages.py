"""A model on a server in the app: the sidebar's Connect, the Step-by-step and Beam-tree pages on a
served trace (the badge, the 'other' bar), the pages that need weights, and what a link may not do.

Stand-in servers (stub_server) count every request that reaches them; the real llama.cpp server
(llama_server) serves the bundled SmolLM2 GGUF. No local model is loaded while a served model is
chosen; the pinned-deployment test loads the tiny Llama through a spy.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import figures, install_loads, open_app, texts

import ui.shared_model
from figures.labels import WORD_JOINER
from served_helpers import free_port
from tiny_models import tiny_llama

from served_fixtures import TWO_TOKENS  # noqa: E402

pytestmark = pytest.mark.usefixtures("navigation_frame")

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
COMPLETION = TWO_TOKENS        # the stand-in server's one answer (tests/served_fixtures.py)
WEIGHT_PAGES = ["compare", "expected_embedding", "kv_cache"]



SERVED = texts("served")


def unescaped(markdown: str) -> str:
    """The text a reader sees: Markdown escapes resolved, invisible word joiners dropped."""
    return re.sub(r"\\(.)", r"\1", markdown).replace(WORD_JOINER, "")


def app(page: str, *, params: dict | None = None, state: dict | None = None) -> AppTest:
    return open_app(page, params=params, state=state, new_tokens=2)


def connect(at: AppTest, url: str) -> AppTest:
    """Choose a served model, type the address and press Connect, as a user does."""
    if at.sidebar.selectbox(key="model_choice").value != "served":
        at.sidebar.selectbox(key="model_choice").set_value("served").run()
    at.sidebar.text_input(key="server").set_value(url).run()
    at.sidebar.button(key="served_connect").click().run()
    assert not at.exception, at.exception
    return at


def infos(at: AppTest) -> list:
    return [unescaped(i.value) for i in at.info]


def errors(at: AppTest) -> list:
    return [unescaped(e.value) for e in at.error]


def charts(at: AppTest) -> list:
    return figures(at)


def test_a_link_with_a_server_fills_the_box_but_sends_nothing_until_connect(stub_server, no_local_loads):
    url = stub_server(COMPLETION)
    at = app("step_by_step", params={"server": url, "served_model": "stub-model"})
    assert at.sidebar.selectbox(key="model_choice").value == "served"
    assert at.sidebar.text_input(key="server").value == url
    assert SERVED["connect_first"] in infos(at)
    captions = [unescaped(c.value) for c in at.sidebar.caption]
    assert SERVED["not_connected"] in captions
    for page in ["beam_tree", *WEIGHT_PAGES, "step_by_step"]:      # every page, and reruns: still nothing sent
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
    assert stub_server.requests(url) == []

    at.sidebar.button(key="served_connect").click().run()             # the user's own click
    assert not at.exception, at.exception
    assert stub_server.requests(url)[0] == ("GET", "/v1/models")
    assert ("POST", "/v1/completions") in stub_server.requests(url)
    shown = [unescaped(c.value) for c in at.sidebar.caption]
    assert f"Connected: stub-model on llama-cpp-python at {url}" in shown
    assert not errors(at)


def test_an_address_that_looks_like_markdown_stays_text(stub_server, no_local_loads):
    url = stub_server(COMPLETION)
    address = url + "/![x](http://evil.example/p.png)"               # a path the stub answers like any other
    at = app("step_by_step", params={"server": address})
    at.sidebar.button(key="served_connect").click().run()
    assert not at.exception, at.exception
    assert stub_server.requests(url)[0] == ("GET", "/![x](http://evil.example/p.png)/v1/models")
    connected = [c.value for c in at.sidebar.caption if "Connected" in c.value]
    assert len(connected) == 1
    assert unescaped(connected[0]) == f"Connected: stub-model on llama-cpp-python at {address}"
    assert "\\!\\[x\\]\\(" in connected[0]                          # every Markdown character escaped
    assert "http" + WORD_JOINER + "\\://evil" in connected[0]          # and no bare address left to link


# ---- errors are one line; what was on screen stays ---------------------------------------------------
def test_a_server_that_goes_down_gives_one_line_and_the_trace_stays(stub_server, no_local_loads):
    url = stub_server(COMPLETION)
    at = connect(app("step_by_step", params={"server": url}), url)
    trace = at.session_state["sbs_served"]
    assert [s.chosen_texts[0] for s in trace.steps] == [" Paris", "."]
    before = charts(at)
    assert before

    stub_server.stop(url)
    at.sidebar.text_area(key="prompt").set_value("The capital of Italy is").run()
    assert not at.exception, at.exception
    message = errors(at)
    assert message == [f"The server could not decode: server at {url} is not running (connection refused)"], message
    assert at.session_state["sbs_served"] is trace
    assert charts(at)[0]["data"] == before[0]["data"]                   # the chart from before, unchanged

    dead = f"http://127.0.0.1:{free_port()}"                            # a second address, nothing listens
    at.sidebar.text_input(key="server").set_value(dead).run()
    at.sidebar.button(key="served_connect").click().run()
    assert not at.exception, at.exception
    message = [m for m in errors(at) if "Could not connect" in m]
    assert message == [f"Could not connect: server at {dead} is not running (connection refused)"], errors(at)
    assert at.session_state["sbs_served"] is trace
    assert SERVED["address_changed"] in [unescaped(c.value) for c in at.sidebar.caption]


def test_soft_and_gumbel_are_not_offered_on_a_server(stub_server, no_local_loads):
    url = stub_server(COMPLETION)
    at = connect(app("step_by_step", params={"server": url}), url)
    assert len(at.segmented_control(key="strategy").options) == 3       # greedy, sample, beam


# ---- pages that need the weights say so in one line ---------------------------------------------------
@pytest.mark.parametrize("page", WEIGHT_PAGES)
def test_pages_that_need_the_weights_say_so(stub_server, no_local_loads, page):
    url = stub_server(COMPLETION)
    at = connect(app(page, params={"server": url}), url)
    assert SERVED["needs_weights"] in infos(at)
    assert not errors(at) and not charts(at)


def _scoring_server(prompt: str, reference: str):
    """A llama.cpp stand-in: the echo splits prompt + reference into words; after the prompt it lists
    ' Paris' -0.5 and ' the' -1.5; after ' Paris' it lists ',' -1.0 and ' and' -2.0 ('.' is not listed)."""
    whole = prompt + reference
    words = [w for w in re.findall(r" ?[^ .]+|\.", whole)]
    offsets = [sum(len(w) for w in words[:i]) for i in range(len(words))]

    def completion(payload):
        if payload.get("echo"):
            return {"choices": [{"text": whole + "!", "finish_reason": "length", "logprobs": {
                "tokens": words + ["!"], "text_offset": offsets + [len(whole)],
                "token_logprobs": [None] + [-1.0] * len(words), "top_logprobs": [None] + [{"x": -1.0}] * len(words)}}]}
        top = {" Paris": -0.5, " the": -1.5} if payload["prompt"] == prompt else {",": -1.0, " and": -2.0}
        return {"choices": [{"text": next(iter(top)), "finish_reason": "length", "logprobs": {
            "tokens": [next(iter(top))], "token_logprobs": [next(iter(top.values()))], "top_logprobs": [top]}}]}

    return completion


def test_teacher_forcing_scores_the_reference_on_the_server(stub_server, no_local_loads):
    url = stub_server(_scoring_server(PROMPT, " Paris."), owned_by="llamacpp")
    at = connect(app("teacher_forcing", params={"server": url}, state={"tf_reference": " Paris."}), url)
    assert not errors(at)
    # ' Paris' listed at -0.5 (rank 1); '.' not in the top-2 after it: bounded by the 2nd listed, -2.0 (rank 3)
    values = {m.label: m.value for m in at.metric}
    teacher = texts("teacher")
    assert values[teacher["metric_tokens"]] == "2"
    assert values[teacher["metric_logprob"]] == "≤ -2.50"
    assert values[teacher["metric_perplexity"]] == "≥ 3.49"            # exp(2.5 / 2)
    assert values[teacher["metric_top1"]] == "1/2"
    assert any("1 of 2 reference tokens were outside it" in i for i in infos(at))
    assert SERVED["teacher_needs_weights"] in infos(at)
    [chart] = charts(at)
    assert [round(y, 4) for y in chart["data"][0]["y"]] == [round(2.718281828 ** -0.5, 4),
                                                             round(2.718281828 ** -2.0, 4)]


def test_the_interview_says_its_demos_need_the_weights(no_local_loads):
    at = app("step_by_step", params={"server": "http://127.0.0.1:8000"})
    at.switch_page("pages/interview.py").run()
    assert not at.exception, at.exception
    assert SERVED["demos_need_weights"] in infos(at)


def test_every_new_text_reads_in_chinese_too(stub_server, no_local_loads):
    zh = texts("served", "zh")
    at = app("step_by_step", params={"lang": "zh", "server": stub_server(COMPLETION)})
    assert zh["connect_first"] in infos(at)
    assert at.sidebar.button(key="served_connect").label == zh["connect"]
    at.switch_page("pages/kv_cache.py").run()
    assert zh["needs_weights"] in infos(at)


# ---- a pinned deployment offers no served model unless it names one ---------------------------------
@pytest.fixture
def asked_loads(monkeypatch):
    """The tiny Llama for every load, the names asked for recorded; the deployment's pin as each test sets it."""
    lm = tiny_llama()
    asked = install_loads(monkeypatch, lambda name: lm, keep_pin=True)
    yield asked
    ui.shared_model._models.clear()


def test_a_pinned_deployment_refuses_served_models(stub_server, asked_loads, monkeypatch):
    monkeypatch.setenv("DECODESCOPE_MODELS", "bundled")
    url = stub_server(COMPLETION)
    at = app("step_by_step", params={"server": url})
    choice = at.sidebar.selectbox(key="model_choice")
    assert "served" not in choice.options and choice.value != "served"
    assert SERVED["not_offered"] in [unescaped(c.value) for c in at.sidebar.caption]
    assert "server" not in at.query_params                              # nor passed on in a copied link
    assert at.sidebar.get("text_input") and not [w for w in at.sidebar.text_input if w.key == "server"]
    assert stub_server.requests(url) == []
    assert asked_loads == [None]                                         # the pinned bundled model instead


def test_a_pinned_deployment_that_names_served_offers_it(stub_server, asked_loads, monkeypatch):
    monkeypatch.setenv("DECODESCOPE_MODELS", "bundled, served")
    assert ui.shared_model.offered_models() == ("smollm2-135m",) or "served" not in ui.shared_model.offered_models()
    url = stub_server(COMPLETION)
    at = connect(app("step_by_step"), url)
    assert not errors(at), errors(at)
    assert at.sidebar.selectbox(key="model_choice").value == "served", infos(at)
    assert at.session_state["sbs_served"].model_facts["served"]["url"] == url, infos(at)
    assert asked_loads == [None]          # the first run, before the choice: the pinned model, not 'served'


# ---- the real llama.cpp server ------------------------------------------------------------------------
def _other_bar(chart: dict) -> dict:
    bars = [d for d in chart["data"] if d.get("type") == "bar" and d.get("name") == SERVED["fig_other"]]
    assert len(bars) == 1, [d.get("name") for d in chart["data"]]
    return bars[0]


def test_step_by_step_on_llama_cpp_shows_the_badge_and_the_other_bar(llama_server, no_local_loads):
    at = app("step_by_step", params={"server": llama_server}, state={"max_new_tokens": 3, "top_n": 5})
    at = connect(at, llama_server)
    trace = at.session_state["sbs_served"]
    assert trace.model_facts["served"]["url"] == llama_server and len(trace.steps) == 3
    assert trace.config.top_n == 5
    for index in range(3):
        step = trace.steps[index]
        listed = [c.prob for c in step.candidates]
        other = 1.0 - sum(listed)                          # by hand, from the trace
        assert 0.0 < other < 1.0
        chart = charts(at)[0]
        bar = _other_bar(chart)
        assert bar["y"][0] == pytest.approx(other, abs=1e-9)
        ticks = chart["layout"]["xaxis"]["ticktext"]
        assert ticks[-1] == SERVED["fig_other"] and len(ticks) == len(step.candidates) + 1
        badge = (f"top-5 from llama-cpp-python at {llama_server}, {SERVED['numbers_raw']}: the listed tokens are "
                 f"exact, the other {other:.1%} is shown as 'other'")
        assert badge in infos(at), infos(at)
        assert chart["layout"]["title"]["subtitle"]["text"].replace("<br>", " ") == badge
        if index < 2:
            at.button(key="sbs_next").click().run()
            assert not at.exception, at.exception
    page = infos(at)
    assert SERVED["cannot"] in page
    assert SERVED["viewing"].format(steps=3, strategy="greedy") in page
    assert not errors(at)


def test_the_beam_tree_on_llama_cpp_carries_the_badge(llama_server, no_local_loads):
    at = app("beam_tree", params={"server": llama_server}, state={"max_new_tokens": 3, "num_beams": 2})
    at = connect(at, llama_server)
    trace = at.session_state["beam_served"]
    assert trace.nodes and trace.config.num_beams == 2
    last = trace.steps[-1]
    other = 1.0 - sum(c.prob for c in last.candidates)
    badge = SERVED["badge_beam"].format(n=4, kind="llama-cpp-python", url=llama_server, step=len(trace.steps),
                                        other=f"{other:.1%}", numbers=SERVED["numbers_raw"])
    assert badge in infos(at), infos(at)
    assert charts(at)[0]["layout"]["title"]["subtitle"]["text"].replace("<br>", " ") == badge
    assert SERVED["cannot"] in infos(at)
    assert not errors(at)


def test_a_saved_served_trace_opens_with_its_badge_and_contacts_nobody(stub_server, no_local_loads):
    from engine.config import DecodeConfig
    from engine.served import Server
    from engine.served.decode import served_decode

    url = stub_server(COMPLETION)
    trace = served_decode(Server.connect(url), PROMPT, DecodeConfig(max_new_tokens=2, top_n=3))
    stub_server.stop(url)                                          # the file names it; nothing may call it
    listener = stub_server(COMPLETION)
    at = app("step_by_step", params={"server": listener})
    at.file_uploader(key="sbs_upload").set_value(("served.json", trace.to_json().encode(), "application/json")).run()
    assert not at.exception, at.exception
    other = 1.0 - (0.6065306597126334 + 0.22313016014842982 + 0.0820849986238988)   # e^-0.5 + e^-1.5 + e^-2.5
    assert _other_bar(charts(at)[0])["y"][0] == pytest.approx(other, abs=1e-12)
    badge = (f"top-3 from llama-cpp-python at {url}, {SERVED['numbers_raw']}: the listed tokens are exact, "
             f"the other {other:.1%} is shown as 'other'")
    assert badge in infos(at), infos(at)
    assert stub_server.requests(listener) == []


@pytest.mark.parametrize("strategy", ["sample", "beam"])
def test_sampling_and_beam_on_the_step_page_show_a_served_trace(stub_server, no_local_loads, strategy):
    url = stub_server(COMPLETION)
    at = connect(app("step_by_step", params={"server": url, "strategy": strategy, "num_beams": 2}), url)
    trace = at.session_state["sbs_served"]
    assert trace.config.strategy == strategy and trace.steps
    step = trace.steps[0]
    other = 1.0 - sum(c.prob for c in step.candidates)
    assert _other_bar(charts(at)[0])["y"][0] == pytest.approx(other)
    assert any(i.startswith(f"top-{trace.model_facts['served']['top_n']} from llama-cpp-python at {url}")
               for i in infos(at)), infos(at)
    assert not errors(at)


def test_a_reference_over_the_byte_limit_sends_no_scoring_request(stub_server, no_local_loads):
    """A served model's tokenizer is the server's, so only bytes are counted here; that is enough to send nothing."""
    url = stub_server(_scoring_server(PROMPT, " Paris."), owned_by="llamacpp")
    at = connect(app("teacher_forcing", params={"server": url}, state={"tf_reference": " Paris."}), url)
    scored = len(stub_server.requests(url))
    values = {m.label: m.value for m in at.metric}
    big = " Paris is a big city." * 400                                    # 8,400 bytes
    at.text_area(key="tf_reference").set_value(big).run()
    assert not at.exception, at.exception
    messages = errors(at)
    assert len(messages) == 1 and "reference: is 8,400 bytes" in messages[0] and "8,000" in messages[0], messages
    assert len(stub_server.requests(url)) == scored, "the server was asked to score a reference over the limit"
    assert {m.label: m.value for m in at.metric} == values               # the scores on screen stay


def test_a_stream_cut_short_shows_the_steps_received_and_says_so(no_local_loads):
    """A server that closes its stream after two tokens, without saying why (tests/hostile_servers.py): the
    page shows the two steps with one line that says the answer ended early, and does not keep them as whole."""
    import hostile_servers as hs

    tokens = [(" Paris", -0.5), (".", -1.2)]

    def cut(method, path, payload):
        if path == "/v1/completions":
            return hs.events_head() + hs.token_events(tokens)
        return hs.well_formed(method, path, payload)

    server = hs.RawServer(cut)
    try:
        at = connect(app("step_by_step", params={"server": server.url}), server.url)
    finally:
        server.close()
    trace = at.session_state["sbs_served"]
    assert [s.chosen_texts[0] for s in trace.steps] == [t for t, _ in tokens]
    assert errors(at) == [SERVED["decode_cut_short"].format(
        n=2, error=f"server at {server.url} closed the stream after 2 tokens without saying why it ended "
                   "(no finish_reason): the answer is cut short")], errors(at)
    assert charts(at)
    assert at.session_state["sbs_served_id"] is None          # decoded again on the next run, never kept as whole


def test_processed_numbers_are_said_on_the_badge_and_the_figure(stub_server, no_local_loads):
    """A vLLM started with --logprobs-mode processed_logprobs (a stand-in applying the chain by hand): the page
    says its numbers come after the server's sampler, and shows them once, not shaped again."""
    from served_fixtures import vllm_like

    url = stub_server(vllm_like("processed_logprobs"), owned_by="vllm")
    at = connect(app("step_by_step", params={"server": url, "strategy": "sample", "temperature": 0.5,
                                             "top_k": 3}), url)
    trace = at.session_state["sbs_served"]
    assert trace.model_facts["served"]["logprobs"] == "processed"
    badge = [i for i in infos(at) if i.startswith(f"top-{trace.config.top_n} from vllm at {url}")]
    assert badge and SERVED["numbers_processed"] in badge[0], infos(at)
    assert SERVED["numbers_processed"] in charts(at)[0]["layout"]["title"]["subtitle"]["text"].replace("<br>", " ")
    assert all(c.shaped_prob == pytest.approx(c.prob) for c in trace.steps[0].candidates)
    assert not errors(at)


def test_step_by_step_names_the_samplers_a_served_model_ignores(stub_server, no_local_loads):
    """A llama-cpp-python server (owned_by 'me') takes mirostat and nothing else of llama.cpp's samplers, and
    its penalties change nothing: those that are on are named, and what a vLLM server takes is said."""
    url = stub_server(COMPLETION, owned_by="me")
    at = connect(app("step_by_step", params={"server": url, "strategy": "sample", "sampler_order": "llama.cpp",
                                             "typical_p": "0.9", "presence_penalty": "0.5", "mirostat": "2"}), url)
    words, labels = texts("samplers"), SERVED["samplers_ignored"].split("{settings}")
    warned = [unescaped(w.value) for w in at.warning if labels[0].format(kind="llama-cpp-python") in unescaped(w.value)]
    assert len(warned) == 1, [w.value for w in at.warning]
    assert words["typical_p"] in warned[0] and words["presence_penalty"] in warned[0]
    assert words["mirostat"] not in warned[0]
    assert SERVED["samplers_vllm"] in [unescaped(c.value) for c in at.caption]
    [sent] = [body for body in stub_server.sent(url, "/v1/completions") if body.get("max_tokens") != 1 or
              body.get("mirostat_mode")]
    assert sent["mirostat_mode"] == 2 and "typical_p" not in sent


# ---- a room's own model server (python -m room --served) -------------------------------------------------
def test_a_room_opens_step_by_step_on_its_own_model_server_without_connect(stub_server, no_local_loads,
                                                                          monkeypatch):
    """The room's operator started the server: a session opens on it connected, with no link and no click
    (a tab that came back to another app process finds its model again), while another address still waits."""
    url = stub_server(COMPLETION)
    monkeypatch.setenv("DECODESCOPE_ROOM_SERVER", url)
    monkeypatch.setenv("DECODESCOPE_MODELS", "served")           # the app process holds no model
    at = app("step_by_step")
    assert not at.exception, at.exception
    assert at.sidebar.selectbox(key="model_choice").value == "served"
    assert at.sidebar.text_input(key="server").value == url
    assert [s.chosen_texts[0] for s in at.session_state["sbs_served"].steps] == [" Paris", "."]
    assert stub_server.requests(url)[0] == ("GET", "/v1/models")
    for page in WEIGHT_PAGES:                                        # pages on the weights: one line, no chart
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
        assert SERVED["needs_weights"] in infos(at) and not charts(at)

    other = stub_server(COMPLETION)                                  # a link to another server: Connect first
    at = app("step_by_step", params={"server": other})
    assert not at.exception, at.exception
    assert SERVED["connect_first"] in infos(at)
    assert stub_server.requests(other) == []
