"""A room in a real browser: `python -m room` with two app processes behind HAProxy, all on 127.0.0.1.

One room for the module, eight browser contexts (eight students) opened through the proxy at once: the cookie
spreads them over both processes and keeps each on its own for 8 Nexts; a trace downloaded from one process
is uploaded to the other, both through the proxy; a second HAProxy without the cookie, on the same two
processes, shows what the cookie is for (a session's download is found only on its own process, so a request
that goes to the other finds nothing); then one process is killed, and its students' tabs land on the other
with their settings and step, the same tokens decoded again, and a note saying so. Every process the room
started is stopped by its id at the end, whatever happened (the launcher stops them; what is left is killed).
Skipped, with the reason, when HAProxy is not installed (`make test` installs it as root).

The students are also a classroom (bench/load_classroom.py's plan and checks): each has a sampled decode of
its own prompt and seed, students 0 and 1 are twins (same prompt, same seed); each shows its own prompt and
exactly the tokens the engine samples in this process for that prompt and seed (no session sees another's
result, no random state leaks between sessions or processes), and the twins show identical text. The model is
loaded once per process: the process that takes every student when the other dies holds, with those eight
sessions, less than 300 MB more than it held with one.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from playwright.sync_api import expect

from bench.load_classroom import TEMPERATURE, Session, check, expected_tokens, plan, rss_mb
from browser_helpers import (MODEL_TIMEOUT_MS, ROOT, SCREENSHOTS, START_TIMEOUT_S, _die_with_parent,
                             assert_no_exception,
                             begin_action, free_port, messages, new_context, shown_tokens, upload,
                             wait_chart, wait_idle)
from room.config import COOKIE, render
from room.launch import haproxy_binary

pytestmark = pytest.mark.skipif(
    haproxy_binary() is None, reason="HAProxy is not installed (apt-get install haproxy; `make test` does it as root)")

STUDENTS = 8
NEXTS = 8           # a Next is a message on the tab's one websocket: the cookie chose its process once, at
                    # the page load; more Nexts would test the websocket, not the cookie
TOKENS = NEXTS + 4          # each student's decode; 1 + NEXTS of them are on screen at the end
CLASS = plan(STUDENTS)      # each student's prompt and seed; students 0 and 1 are twins
SOLO = Session(-1, "A single student asks about the weather:", 7)
NOTE = "The app's server process was restarted"          # the start of common.session_restarted (en)
DOWNLOADED: dict = {}       # the trace download's address and the tab that made it, for the control
MEMORY: dict = {}           # the surviving process's resident memory with one session (MB)


def link(student: Session) -> str:
    return urlencode({"prompt": student.prompt, "strategy": "sample", "temperature": TEMPERATURE,
                      "seed": student.seed, "max_new_tokens": TOKENS})


def step_of(url: str) -> int:
    return int(parse_qs(urlsplit(url).query).get("step", ["1"])[0])


def click_next(pages: list) -> None:
    """Click Next on every page at once, as a class clicks, and wait for each to show the step after its own."""
    wanted = [step_of(p.url) + 1 for p in pages]
    sent = [messages(p) for p in pages]
    counts = [begin_action(p) for p in pages]
    for page in pages:
        page.locator(".st-key-sbs_next button").first.click()
    for page, step, count, answered in zip(pages, wanted, counts, sent):
        page.wait_for_url(lambda url, step=step: step_of(url) == step, timeout=MODEL_TIMEOUT_MS)
        wait_idle(page, after=count, answered=answered)


def server_id(context) -> str | None:
    return {c["name"]: c["value"] for c in context.cookies()}.get(COOKIE)


def ours_still_running(pid: int, run_dir: Path) -> bool:
    """Whether `pid` is still one of the room's processes (an app process, or HAProxy on the room's file),
    not a process that got the number after ours ended."""
    import psutil

    try:
        cmdline = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
    return "ui.serve" in cmdline or str(run_dir) in cmdline


class Room:
    """The launcher's process, its run folder, and every process id it ever reported (to stop what is left)."""

    def __init__(self, proc: subprocess.Popen, run_dir: Path, port: int):
        self.proc, self.run_dir, self.port = proc, run_dir, port
        self.url = f"http://127.0.0.1:{port}"
        self.pids: set = set()

    def status(self) -> dict:
        status = json.loads((self.run_dir / "room.json").read_text(encoding="utf-8"))
        self.pids |= {a["pid"] for a in status["apps"] if a["pid"]} | {status["proxy"]["pid"]}
        return status

    def app(self, name: str) -> dict:
        return next(a for a in self.status()["apps"] if a["name"] == name)

    def log(self) -> str:
        return (self.run_dir / "room.out").read_text(encoding="utf-8", errors="replace")[-3000:]


def _answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("room")
    port = free_port()
    with open(run_dir / "room.out", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "room", "--replicas", "2", "--port", str(port),
                                 "--app-port-base", "0", "--run-dir", str(run_dir)], cwd=ROOT,
                                env=dict(os.environ, DECODESCOPE_MODELS="bundled", PYTHONUNBUFFERED="1"),
                                stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    room = Room(proc, run_dir, port)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ((run_dir / "room.json").is_file()
                   and all(_answering(f"http://127.0.0.1:{a['port']}/_stcore/health") for a in room.status()["apps"])
                   and _answering(room.url + "/_stcore/health")):
            assert proc.poll() is None, f"the room exited with {proc.returncode}:\n{room.log()}"
            assert time.monotonic() < deadline, f"the room did not answer within {START_TIMEOUT_S} s:\n{room.log()}"
            time.sleep(0.5)
        yield room
    finally:
        proc.send_signal(signal.SIGTERM)               # the launcher stops its processes by their ids
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pid in room.pids:                          # whatever the launcher left, by its id
            if ours_still_running(pid, run_dir):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def expected(bundled) -> dict:
    """What the engine samples in this process for each student's prompt and seed: the first 1 + NEXTS tokens."""
    return {(s.prompt, s.seed): expected_tokens(bundled, s, TOKENS)[:NEXTS + 1] for s in [SOLO, *CLASS]}


@pytest.fixture(scope="module")
def students(browser, room, expected):
    """First one tab alone on the second process (its memory with one session), then eight tabs through the proxy,
    each in its own browser context (its own cookie), each with its own prompt and seed."""
    solo = new_context(browser)
    try:
        app2 = room.app("app2")
        page = solo.new_page()
        page.goto(f"http://127.0.0.1:{app2['port']}/step_by_step?{link(SOLO)}", wait_until="domcontentloaded")
        wait_idle(page)
        wait_chart(page)
        assert problems([read(page, SOLO)], expected, 1) == []
        MEMORY["one_session_mb"] = rss_mb(app2["pid"])
    finally:
        solo.close()
    contexts = [new_context(browser) for _ in range(STUDENTS)]
    try:
        pages = [c.new_page() for c in contexts]
        for student, page in zip(CLASS, pages):     # all at once: the first runs overlap on the two processes
            page.goto(f"{room.url}/step_by_step?{link(student)}", wait_until="domcontentloaded")
        for page in pages:
            wait_idle(page)
            wait_chart(page)
        yield pages
    finally:
        for c in contexts:
            c.close()


def read(page, student: Session) -> Session:
    """What the student's tab shows, into `student` (for bench/load_classroom.py's check): its prompt, once the
    box holds one (it may be drawn a moment after the tokens), and its tokens up to the cursor."""
    box = page.locator("[data-testid='stSidebar'] .st-key-prompt textarea").first
    try:
        expect(box).to_have_value(student.prompt, timeout=30_000)
    except AssertionError:          # the check names the prompt it shows
        pass
    student.shown_prompt = box.input_value()
    student.tokens = [text for _, text in shown_tokens(page)]
    student.seconds = 0.0           # finished
    return student


def problems(shown: list, expected: dict, steps: int) -> list:
    """bench/load_classroom.py's check of the students read, at step `steps` (the engine's first tokens)."""
    return check(shown, {key: tokens[:steps] for key, tokens in expected.items()}, steps)


def test_eight_students_spread_over_both_processes_and_each_stays_on_its_own(students, expected):
    first = [server_id(p.context) for p in students]
    assert set(first) == {"app1", "app2"}, first
    for page in students:
        assert page.get_by_text(NOTE).count() == 0          # a first visit names no earlier session
    # each shows its own prompt and the engine's first token for it, the twins the same one
    assert problems([read(p, s) for p, s in zip(students, CLASS)], expected, 1) == []
    for n in range(1, NEXTS + 1):
        click_next(students)
        assert [step_of(p.url) for p in students] == [n + 1] * STUDENTS
        assert [server_id(p.context) for p in students] == first
    for page in students:
        assert [s for s, _ in shown_tokens(page)] == list(range(1, NEXTS + 2))
        assert_no_exception(page)
    # and at the end its own 1 + NEXTS tokens, exactly the engine's for its prompt and seed; the twins identical
    assert problems([read(p, s) for p, s in zip(students, CLASS)], expected, NEXTS + 1) == []


def test_a_download_from_one_process_and_its_upload_to_the_other(students, tmp_path):
    giver = next(p for p in students if server_id(p.context) == "app1")
    taker = next(p for p in students if server_id(p.context) == "app2")
    with giver.expect_download() as info:
        giver.locator(".st-key-sbs_export_trace_json button").first.click()
    path = tmp_path / "trace.json"
    info.value.save_as(path)
    trace = json.loads(path.read_text(encoding="utf-8"))
    assert trace["prompt"] == CLASS[students.index(giver)].prompt and len(trace["steps"]) == NEXTS + 1
    students_media = info.value.url
    viewing = taker.get_by_text("Viewing a recorded trace")
    upload(taker, "sbs_upload", path, shows=viewing)        # through the proxy, to the taker's own process
    assert viewing.count() >= 1
    assert_no_exception(taker)
    DOWNLOADED.update(media=students_media, giver=giver)


def test_without_the_cookie_a_request_that_moves_to_the_other_process_finds_nothing(room, students, tmp_path):
    """The control: the same two processes behind a proxy that sends each request to the next one in turn.
    The giver's trace lives in its own process: with the cookie every fetch finds it, without it every
    other fetch lands on the other process, which has no such file."""
    media, giver = DOWNLOADED["media"], DOWNLOADED["giver"]
    path = urlsplit(media).path
    cookie = {"Cookie": f"{COOKIE}={server_id(giver.context)}"}
    sticky = [_status(f"{room.url}{path}", cookie) for _ in range(4)]
    assert sticky == [200] * 4

    port = free_port()
    cfg = tmp_path / "roundrobin.cfg"
    cfg.write_text(render([f"127.0.0.1:{a['port']}" for a in room.status()["apps"]], port, sticky=False))
    proxy = subprocess.Popen([haproxy_binary(), "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + 30
        while not _answering(f"http://127.0.0.1:{port}/_stcore/health"):
            assert proxy.poll() is None and time.monotonic() < deadline, "the control proxy did not start"
            time.sleep(0.2)
        moving = [_status(f"http://127.0.0.1:{port}{path}", cookie) for _ in range(4)]
        # a tab whose server stops answering (this proxy stops): the dialog says so in the page's words and
        # language, not Streamlit's "Are you connected to the internet?"
        tab = giver.context.new_page()
        tab.goto(f"http://127.0.0.1:{port}/interview?lang=zh&tour=0", wait_until="domcontentloaded")
        wait_idle(tab)
        proxy.terminate()
        proxy.wait(timeout=30)
        said = json.loads((ROOT / "assets" / "texts" / "zh" / "common.json").read_text(encoding="utf-8"))
        dialog = tab.locator('[role="dialog"]')
        dialog.get_by_text(said["offline_title"]).wait_for(timeout=60_000)
        assert said["offline_body"] in dialog.inner_text()
        assert "internet" not in dialog.inner_text() and "Streamlit" not in dialog.inner_text()
        tab.screenshot(path=str(SCREENSHOTS / "room_server_stopped_zh.png"))
        tab.close()
    finally:
        if proxy.poll() is None:
            proxy.terminate()
            proxy.wait(timeout=30)
    assert sorted(moving) == [200, 200, 404, 404], moving


def _status(url: str, headers: dict) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_process_that_dies_leaves_its_students_on_the_other_with_their_steps(room, students):
    taker = next(p for p in students if p.get_by_text("Viewing a recorded trace").count())   # holds an upload now
    before = {id(p): (p.url, shown_tokens(p), server_id(p.context)) for p in students}
    dead = room.app("app1")
    movers = [p for p in students if server_id(p.context) == "app1"]
    stayers = [p for p in students if server_id(p.context) == "app2" and p is not taker]
    os.kill(dead["pid"], signal.SIGKILL)
    for page in movers:
        page.get_by_text(NOTE).first.wait_for(state="visible", timeout=120_000)
        wait_idle(page)
        wait_chart(page)
    for page in movers:
        url, tokens, _ = before[id(page)]
        assert server_id(page.context) == "app2"
        assert parse_qs(urlsplit(page.url).query) == parse_qs(urlsplit(url).query)     # settings and step
        assert shown_tokens(page) == tokens                  # decoded again on the other process: the same tokens
        assert_no_exception(page)
    for page in stayers:                                     # the other process's students saw nothing happen
        assert page.get_by_text(NOTE).count() == 0 and shown_tokens(page) == before[id(page)][1]
    # the survivor now holds every student's session: the model is not loaded again per session
    eight = rss_mb(room.app("app2")["pid"])
    assert eight - MEMORY["one_session_mb"] < 300, (MEMORY, eight)
    mover = movers[0]                                        # and the moved student goes on from there
    click_next([mover])
    assert step_of(mover.url) == NEXTS + 2 and server_id(mover.context) == "app2"
    deadline = time.monotonic() + 30                         # the room started the dead process again
    while room.app("app1")["pid"] in (None, dead["pid"]):
        assert time.monotonic() < deadline, room.log()
        time.sleep(0.5)
    assert room.app("app1")["restarts"] == 1
