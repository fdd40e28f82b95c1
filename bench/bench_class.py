"""A class at the server: N students on Step by step, played over Streamlit's own websocket protocol.

    .venv/bin/python -m bench.bench_class [--students 30 | 2,4,8] [--seconds 120] [--alone-seconds 60]
                                          [--processes K | --url URL]

No browser: each student is a websocket on `/_stcore/stream` that sends the BackMsg a browser
sends (`rerun_script` with the page, the address's query and the widget that changed) and reads
the ForwardMsgs back (deltas, script_finished), so the machine's cores go to the server, not to
20 Chromium tabs. Every student opens the same shared link (Step by step, a prompt, 64 new tokens),
waits for the first run, then presses Next every 2 s: the Next button's widget id and its fragment
come from the deltas, and the click is a `trigger_value` on that id, as the browser sends it. Now
and then (MIX) a student branches (picks the second candidate and presses Branch, one rerun for
both), switches the strategy (greedy <-> sample, a run of the whole page), or opens Compare (its
lanes decode the link's 64 tokens each: tens of seconds of CPU) and comes back; at the end of the
decode (Next disabled) it presses Reset. A student waits for its run to end before its next click
(a student reads the step first), so a slow server also slows the clicks: the clicks per second
printed say how much the class asked of it.

Per click: seconds from sending the BackMsg to the script_finished that ends the run it started; for Next also
to the delta that brings Step by step's chart (`next_chart`): the page decodes the next step after sending
everything (Stepper.look_ahead), so a run's end comes a forward pass after what the reader waits for.
Printed: p50/p95 per action for one student alone and for N students, their ratio (the target:
p95 Next with N students <= 3 x alone), clicks per second, exceptions shown in the deltas, error
lines, disconnects, the server's CPU seconds per click and cores busy, and its peak RSS (at
start, with one session, with N: the cost of a session), each figure with the machine's load
average beside it. Several class sizes (--students 2,4,8) run one after the other on one server.
With --processes K it starts K app processes (each with its own model, on a port of its own) and keeps student i
on process i mod K, as a proxy with sticky sessions would: what a room served by several processes gets.
With --room RUN_DIR the class goes through a room's proxy (`python -m room`, `make room`): HAProxy spreads the
students over its app processes, whose ids the bench reads from the room's room.json to measure their memory
(each process's peak is printed) and CPU. With --served URL the link names a model server: each student presses
Connect, the server decodes the 64 tokens, and Next only moves through that trace (the page is still built here).
Without --url or --room it starts `streamlit run app.py` on a free port and stops it at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.state.common import is_keyed_element_id, user_key_from_element_id

PROMPT = "Once upon a time, in a small village by the sea,"
NEW_TOKENS = 64
CLICK_EVERY_S = 2.0
CHART_KEY = "sbs_chart"           # Step by step's chart element
NEXT_CHART = "next_chart"         # a Next timed to its chart's arrival, beside the same Next timed to its run's end
ACTION_TIMEOUT_S = 600          # one run that has not ended by then counts as an error
DONE = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
        ForwardMsg.FINISHED_WITH_COMPILE_ERROR}
WIDGETS = ("button", "selectbox", "button_group", "slider", "radio", "multiselect", "number_input", "checkbox")
# how often a student does something other than Next (the rest of the clicks are Next)
MIX = (("branch", 0.05), ("strategy", 0.03), ("compare", 0.005))


# ---- the protocol: what the browser keeps from the ForwardMsgs, and the BackMsgs it sends ------
@dataclass
class Widget:
    id: str
    kind: str                     # the Element field: button, selectbox, button_group, ...
    fragment_id: str = ""         # a widget inside a fragment reruns only that fragment
    disabled: bool = False
    options: list = field(default_factory=list)


@dataclass
class Screen:
    """What one browser tab knows: the page, the address's query, the widgets by key, what went wrong."""
    query_string: str = ""
    page_script_hash: str = ""
    pages: dict = field(default_factory=dict)        # url path -> page script hash
    widgets: dict = field(default_factory=dict)      # user key -> Widget
    exceptions: list = field(default_factory=list)
    error_lines: list = field(default_factory=list)
    chart_seen: bool = False      # Step by step's chart arrived in the run now going on


def read_forward(msg: ForwardMsg, screen: Screen):
    """Fold one ForwardMsg into the screen; return its script_finished status, or None."""
    kind = msg.WhichOneof("type")
    if kind == "new_session":
        screen.page_script_hash = msg.new_session.page_script_hash
    elif kind == "navigation":
        screen.page_script_hash = msg.navigation.page_script_hash
        screen.pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
    elif kind == "page_info_changed":
        screen.query_string = msg.page_info_changed.query_string
    elif kind == "script_finished":
        return msg.script_finished
    elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
        element = msg.delta.new_element
        what = element.WhichOneof("type")
        if what == "bidi_component" and is_keyed_element_id(element.bidi_component.id):
            screen.chart_seen |= user_key_from_element_id(element.bidi_component.id) == CHART_KEY
        if what == "exception":
            screen.exceptions.append(f"{element.exception.type}: {element.exception.message}")
        elif what == "alert" and element.alert.format == element.alert.ERROR:
            screen.error_lines.append(element.alert.body)
        elif what in WIDGETS:
            proto = getattr(element, what)
            if is_keyed_element_id(proto.id):
                key = user_key_from_element_id(proto.id)
                options = [getattr(o, "content", o) for o in getattr(proto, "options", [])]
                screen.widgets[key] = Widget(proto.id, what, msg.delta.fragment_id, proto.disabled, options)
    return None


def rerun_msg(screen: Screen, states: list = (), fragment_id: str = "", page: str | None = None) -> BackMsg:
    """The BackMsg a browser sends for a rerun: the current page (or, on arrival, the page's address),
    the address's query, and the widget states that changed (a button click is a trigger)."""
    back = BackMsg()
    rerun = back.rerun_script
    rerun.query_string = screen.query_string
    if page is not None and page in screen.pages:
        rerun.page_script_hash = screen.pages[page]
    elif page is not None:
        rerun.page_name = page
    else:
        rerun.page_script_hash = screen.page_script_hash
    if fragment_id:
        rerun.fragment_id = fragment_id
    for state in states:
        rerun.widget_states.widgets.append(state)
    rerun.context_info.timezone = "UTC"
    rerun.context_info.locale = "en-US"
    return back


def click(screen: Screen, key: str) -> BackMsg:
    """Press the button with this key (its fragment alone reruns when it sits in one)."""
    w = screen.widgets[key]
    state = BackMsg().rerun_script.widget_states.widgets.add()
    state.id, state.trigger_value = w.id, True
    return rerun_msg(screen, [state], w.fragment_id)


def choose_then_click(screen: Screen, choice_key: str, option: int, button_key: str) -> BackMsg:
    """Pick the option-th entry of a select box and press a button beside it, in one rerun."""
    box, button = screen.widgets[choice_key], screen.widgets[button_key]
    states = BackMsg().rerun_script.widget_states
    chosen = states.widgets.add()
    chosen.id, chosen.string_value = box.id, box.options[option]
    pressed = states.widgets.add()
    pressed.id, pressed.trigger_value = button.id, True
    return rerun_msg(screen, list(states.widgets), button.fragment_id)


def segment(screen: Screen, key: str, option: str) -> BackMsg:
    """Choose a segment of a segmented control (its value travels as the option's label)."""
    w = screen.widgets[key]
    state = BackMsg().rerun_script.widget_states.widgets.add()
    state.id = w.id
    state.string_array_value.data.append(option)
    return rerun_msg(screen, [state], w.fragment_id)


# ---- one student ------------------------------------------------------------------------------
@dataclass
class Student:
    index: int
    rng: random.Random
    screen: Screen = field(default_factory=Screen)
    opened_s: float | None = None
    clicks: list = field(default_factory=list)      # (action, seconds)
    disconnects: list = field(default_factory=list)
    served: bool = False          # the link names a model server: Connect first, Next moves through its trace
    on_compare: bool = False
    strategy: int = 0


async def run_once(ws, back: BackMsg, screen: Screen) -> tuple:
    """Send one BackMsg; seconds until the run it started has finished (a run that hands over to a rerun
    it asked for, st.rerun, is not the end), and until Step by step's chart arrived in it (None if it did not:
    what a reader waits for, now that the page decodes the next step after sending the chart)."""
    started, chart = time.perf_counter(), None
    screen.chart_seen = False
    await ws.send(back.SerializeToString())
    while True:
        msg = ForwardMsg()
        msg.ParseFromString(await ws.recv())
        done = read_forward(msg, screen) in DONE
        if chart is None and screen.chart_seen:
            chart = time.perf_counter() - started
        if done:
            return time.perf_counter() - started, chart


def next_action(s: Student) -> str:
    if s.on_compare:
        return "back"
    w = s.screen.widgets
    if "sbs_next" not in w:
        return "reopen"
    if w["sbs_next"].disabled:         # the end of the decode: start over (a served trace: decode it anew)
        return "strategy" if s.served else "reset"
    roll = s.rng.random()
    for action, p in MIX:
        if roll < p:
            return action
        roll -= p
    return "next"


def message_for(s: Student, action: str) -> BackMsg:
    screen = s.screen
    if action == "branch" and "sbs_branch" in screen.widgets and len(screen.widgets["sbs_branch_token"].options) > 1:
        return choose_then_click(screen, "sbs_branch_token", 1, "sbs_branch")
    if action == "strategy" and "strategy" in screen.widgets:
        options = screen.widgets["strategy"].options
        s.strategy = 1 - s.strategy
        return segment(screen, "strategy", options[s.strategy])
    if action == "compare" and "compare" in screen.pages:
        s.on_compare = True
        return rerun_msg(screen, page="compare")
    if action in ("back", "reopen"):
        s.on_compare = False
        return rerun_msg(screen, page="step_by_step")
    if action == "reset":
        return click(screen, "sbs_reset")
    return click(screen, "sbs_next")


async def student(s: Student, ws_url: str, query: str, until: float) -> None:
    import websockets

    s.screen.query_string = query
    try:
        async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None,
                                      ping_interval=None) as ws:
            s.opened_s, _ = await asyncio.wait_for(run_once(ws, rerun_msg(s.screen, page="step_by_step"), s.screen),
                                                ACTION_TIMEOUT_S)
            if s.served:                   # no request leaves before the student presses Connect
                seconds, _ = await asyncio.wait_for(run_once(ws, click(s.screen, "served_connect"), s.screen),
                                                 ACTION_TIMEOUT_S)
                s.clicks.append(("connect", seconds))
            await asyncio.sleep(s.rng.uniform(0, CLICK_EVERY_S))       # the class does not click in step
            while time.monotonic() < until:
                started = time.monotonic()
                action = next_action(s)
                try:
                    seconds, chart = await asyncio.wait_for(run_once(ws, message_for(s, action), s.screen),
                                                            ACTION_TIMEOUT_S)
                except TimeoutError:
                    s.screen.exceptions.append(f"{action}: no end of run within {ACTION_TIMEOUT_S} s")
                    return
                s.clicks.append((action, seconds))
                if action == "next" and chart is not None:
                    s.clicks.append((NEXT_CHART, chart))
                await asyncio.sleep(max(0.0, started + CLICK_EVERY_S - time.monotonic()))
    except (OSError, websockets.ConnectionClosed) as exc:
        s.disconnects.append(f"{type(exc).__name__}: {exc}")


async def play(ws_urls: list, query: str, students: int, seconds: float, seed: int, pids: list) -> dict:
    """N students at once for this many seconds (after each one's first run), with the servers watched.
    With several app processes, student i stays on process i mod their number (as a proxy's sticky
    sessions keep a student on one)."""
    served = "server=" in query
    class_ = [Student(i, random.Random(seed * 1000 + i), served=served) for i in range(students)]
    until = time.monotonic() + seconds
    stop = asyncio.Event()
    watch = asyncio.create_task(watch_server(pids, stop))
    started, cpu0 = time.monotonic(), time.process_time()
    await asyncio.gather(*(student(s, ws_urls[s.index % len(ws_urls)], query, until) for s in class_))
    wall = time.monotonic() - started
    stop.set()
    server = await watch
    server["client_cpu_s"] = time.process_time() - cpu0        # this process: the students' own cost
    return summary(class_, seconds, wall, server)


async def watch_server(pids: list, stop: asyncio.Event) -> dict:
    """The servers' peak RSS (their sum) while the students are connected, and their CPU seconds over the
    phase (more than 1 s per second in one process: more than one core busy at once, which the GIL allows
    only outside Python)."""
    if not pids:
        await stop.wait()
        return {}
    import psutil

    procs = [psutil.Process(pid) for pid in pids]

    def cpu() -> float:
        return sum(sum(p.cpu_times()[:2]) for p in procs)

    def rss() -> float:
        return sum(p.memory_info().rss for p in procs) / 2**20

    def each() -> list:
        return [p.memory_info().rss / 2**20 for p in procs]

    cpu0, peak, peaks = cpu(), 0.0, [0.0] * len(procs)
    while not stop.is_set():
        peak = max(peak, rss())
        peaks = [max(a, b) for a, b in zip(peaks, each())]
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass
    return {"peak_rss_mb": max(peak, rss()), "peak_rss_each_mb": [max(a, b) for a, b in zip(peaks, each())],
            "cpu_s": cpu() - cpu0, "load": load()}


# ---- figures ------------------------------------------------------------------------------
def percentile(values: list, q: float) -> float | None:
    """The q-quantile by linear interpolation (statistics.quantiles needs two values)."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


def summary(class_: list, seconds: float, wall: float, server: dict) -> dict:
    by_action: dict = {}
    for s in class_:
        for action, t in s.clicks:
            by_action.setdefault(action, []).append(t)
    opened = [s.opened_s for s in class_ if s.opened_s is not None]
    return {"students": len(class_), "seconds": seconds, "wall": wall, "by_action": by_action, "opened": opened,
            "clicks": sum(len(s.clicks) for s in class_), "server": server,
            "exceptions": [f"student {s.index}: {e}" for s in class_ for e in s.screen.exceptions],
            "error_lines": [f"student {s.index}: {e}" for s in class_ for e in s.screen.error_lines],
            "disconnects": [f"student {s.index}: {e}" for s in class_ for e in s.disconnects],
            "load": load()}


def print_phase(name: str, f: dict) -> None:
    print(f"\n{name}: {f['students']} student(s), {f['seconds']:.0f} s of clicks ({f['wall']:.0f} s with the first "
          f"and last runs), {f['clicks']} clicks ({f['clicks'] / f['wall']:.1f}/s)   [{f['load']}]")
    if f["opened"]:
        print(f"  open the link -> first run ends: median {statistics.median(f['opened']):.2f} s, "
              f"worst {max(f['opened']):.2f} s")
    for action, times in sorted(f["by_action"].items(), key=lambda kv: -len(kv[1])):
        print(f"  {action:9s} n={len(times):4d}  p50 {percentile(times, 0.5):6.3f} s  "
              f"p95 {percentile(times, 0.95):6.3f} s  max {max(times):6.3f} s")
    srv = f["server"]
    print(f"  the students themselves (this process): {srv['client_cpu_s']:.1f} CPU-s")
    if "cpu_s" in srv:
        print(f"  server: peak RSS {srv['peak_rss_mb']:.0f} MB, CPU {srv['cpu_s']:.0f} s over {f['wall']:.0f} s "
              f"({srv['cpu_s'] / f['wall']:.2f} cores busy on average, {srv['cpu_s'] / max(1, f['clicks']):.2f} "
              f"CPU-s per click)   [{srv['load']}]")
        if len(srv["peak_rss_each_mb"]) > 1:
            print("  peak RSS per app process: " + ", ".join(f"{mb:.0f} MB" for mb in srv["peak_rss_each_mb"]))
    for label in ("exceptions", "error_lines", "disconnects"):
        items = f[label]
        print(f"  {label.replace('_', ' ')}: {len(items)}" + "".join(f"\n    {e}" for e in items[:5]))
    sys.stdout.flush()


def ratio(alone: dict, group: dict, q: float, action: str = "next") -> float | None:
    a, g = alone["by_action"].get(action), group["by_action"].get(action)
    return percentile(g, q) / percentile(a, q) if a and g else None


def print_ratios(alone: dict, classes: list) -> None:
    for action in ("next", NEXT_CHART):
        if action in alone["by_action"]:
            print_ratio(alone, classes, action)


def print_ratio(alone: dict, classes: list, action: str) -> None:
    what = "Next, to the run's end" if action == "next" else "Next, to the chart's arrival"
    print(f"\n{what}, a class against one student alone (p50 alone {percentile(alone['by_action'][action], 0.5):.3f} "
          f"s, p95 alone {percentile(alone['by_action'][action], 0.95):.3f} s; target: p95 <= 3x)")
    for group in classes:
        r50, r95 = ratio(alone, group, 0.5, action), ratio(alone, group, 0.95, action)
        if r95 is None:
            print(f"  {group['students']:3d} students: no Next measured")
            continue
        times = group["by_action"][action]
        print(f"  {group['students']:3d} students: p50 {percentile(times, 0.5):6.3f} s = {r50:5.1f}x   "
              f"p95 {percentile(times, 0.95):6.3f} s = {r95:5.1f}x  {'reached' if r95 <= 3 else 'NOT reached'}"
              f"   [{group['load']}]")


def rss_mb(pids: list) -> float | None:
    """The app processes' resident memory together, in MB (None for an app this run did not start)."""
    if not pids:
        return None
    import psutil

    return sum(psutil.Process(pid).memory_info().rss for pid in pids) / 2**20


def shared_link(served: str | None = None) -> str:
    """The address's query every student opens (Step by step with a prompt and 64 new tokens; with
    `served`, on the model that server runs)."""
    return urlencode({"prompt": PROMPT, "max_new_tokens": NEW_TOKENS, **({"server": served} if served else {})})


def stream_url(base: str) -> str:
    parts = urlsplit(base)
    return f"{'wss' if parts.scheme == 'https' else 'ws'}://{parts.netloc}{parts.path.rstrip('/')}/_stcore/stream"


def measure(bases: list, pids: list, sizes: list, seconds: float, alone_seconds: float, seed: int,
            served: str | None = None) -> dict:
    """A warm-up student on each app process (the model's first load is not a click), one student alone
    (on the first), then each class size, spread over the processes."""
    ws_urls, query = [stream_url(base) for base in bases], shared_link(served)
    out = {"rss_start": (rss_mb(pids), load())}
    for ws_url in ws_urls:
        asyncio.run(play([ws_url], query, 1, 0, seed + 1, pids))
    out["rss_warm"] = (rss_mb(pids), load())
    out["alone"] = asyncio.run(play(ws_urls[:1], query, 1, alone_seconds, seed, pids))
    print_phase("one student alone", out["alone"])
    out["classes"] = []
    for n in sizes:
        group = asyncio.run(play(ws_urls, query, n, seconds, seed + n, pids))
        print_phase(f"a class of {n}", group)
        out["classes"].append(group)
    return out


def print_memory(out: dict) -> None:
    (start, l0), (warm, l1) = out["rss_start"], out["rss_warm"]
    if start is None:
        return
    alone = out["alone"]["server"]["peak_rss_mb"]
    print(f"\nserver RSS: {start:.0f} MB at start [{l0}], {warm:.0f} MB with the model loaded [{l1}], "
          f"peak {alone:.0f} MB with one student")
    for group in out["classes"]:
        n, peak = group["students"], group["server"]["peak_rss_mb"]
        extra = f": {(peak - alone) / (n - 1):.1f} MB per extra session" if n > 1 else ""
        print(f"  peak {peak:.0f} MB with {n} students{extra}   [{group['server']['load']}]")


def read_room(path: Path) -> dict | None:
    """A running room's address, its app processes (with their ids) and its model server, from the room.json
    that `python -m room` keeps in its run folder; None when there is none. The model server's process is
    counted with the app processes: in a served room it does the forward passes."""
    import json

    path = path / "room.json" if path.is_dir() else path
    if not path.is_file():
        return None
    status = json.loads(path.read_text(encoding="utf-8"))
    model = status.get("model_server") or {}
    url = status["url"].replace("://localhost:", "://127.0.0.1:")
    return {"url": url, "apps": status["apps"], "model_server": model.get("url"),
            "model_server_pid": model.get("pid"),
            "pids": [a["pid"] for a in status["apps"] if a["pid"]] + ([model["pid"]] if model.get("pid") else [])}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", default="30", help="class sizes, comma-separated (each runs in turn)")
    parser.add_argument("--seconds", type=float, default=120, help="how long each class clicks")
    parser.add_argument("--alone-seconds", type=float, default=60, help="how long one student clicks alone first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", help="an app already running (its memory and CPU are then not measured)")
    parser.add_argument("--room", metavar="RUN_DIR", type=Path,
                        help="a room started by `python -m room` (its run folder, or its room.json): the class goes "
                        "through its proxy, and its app processes' memory and CPU are measured")
    parser.add_argument("--processes", type=int, default=1,
                        help="app processes started (each loads the model); student i stays on process i mod K")
    parser.add_argument("--served", metavar="URL", help="the link names this model server (vLLM, llama.cpp; "
                        "'llama': start llama.cpp on the bundled model here): each student presses Connect, the "
                        "server decodes, Next moves through its trace")
    args = parser.parse_args(argv)
    try:
        sizes = [int(n) for n in args.students.split(",")]
    except ValueError:
        parser.error(f"--students takes class sizes like 30 or 5,10,30, not {args.students!r}")
    if min(sizes) < 1 or args.seconds <= 0 or args.alone_seconds <= 0:
        parser.error("a class has at least 1 student; --seconds and --alone-seconds are above 0")
    if args.processes < 1 or ((args.url or args.room) and args.processes != 1) or (args.url and args.room):
        parser.error("--processes is 1 or more, and 1 with --url or --room; --url and --room do not go together")
    room = read_room(args.room) if args.room else None
    if args.room and room is None:
        parser.error(f"--room: no room.json in {args.room} (is the room running? `make room` writes it)")
    print(f"bench_class: classes of {args.students} x {args.seconds:.0f} s, one student alone x "
          f"{args.alone_seconds:.0f} s, Next every {CLICK_EVERY_S:g} s, {args.processes} app process(es), "
          f"{os.cpu_count()} cores   [{load()}]",
          flush=True)
    with contextlib.ExitStack() as running:
        served = args.served
        if served == "llama":
            from tests.served.served_helpers import running_llama_server

            served = running.enter_context(running_llama_server())
        if room is not None:              # through the proxy: HAProxy spreads the students' websockets
            served = served or room["model_server"]
            print(f"the room at {room['url']}: " + ", ".join(f"{a['name']} pid {a['pid']}" for a in room["apps"])
                  + (f", model server pid {room['model_server_pid']}" if room["model_server_pid"] else ""), flush=True)
            out = measure([room["url"]], room["pids"], sizes, args.seconds, args.alone_seconds, args.seed, served)
        elif args.url:
            out = measure([args.url.rstrip("/")], [], sizes, args.seconds, args.alone_seconds, args.seed, served)
        else:
            from tests.browser.browser_helpers import running_server

            logs = Path(running.enter_context(tempfile.TemporaryDirectory()))
            servers = []
            for k in range(args.processes):
                (logs / str(k)).mkdir()
                servers.append(running.enter_context(running_server(logs / str(k))))
            out = measure([s.url for s in servers], [s.pid for s in servers], sizes, args.seconds,
                          args.alone_seconds, args.seed, served)
    print_ratios(out["alone"], out["classes"])
    print_memory(out)
    phases = [out["alone"], *out["classes"]]
    return 1 if any(f["exceptions"] or f["disconnects"] for f in phases) else 0


if __name__ == "__main__":
    sys.exit(main())
