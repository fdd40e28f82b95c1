"""Start a room: N app processes on ports of their own, HAProxy in front, optionally one llama.cpp server.

    python -m room [--replicas 2] [--port 8080] [--host 127.0.0.1] [--served] [--run-dir DIR]

Each app process is `python -m ui.serve` on 127.0.0.1 with one forward-pass thread (DECODESCOPE_THREADS=1: the
GIL keeps a process near one core, so cores go to processes, not to threads) and the room's cookie secret:
Streamlit signs its own cookies with it (its session middleware's, a sign-in's), so a browser that moved to
another process (its own died) is recognised there too. The secret is made when the room starts and lives only
in the processes' environment. DECODESCOPE_MODELS, like the rest of the environment, reaches every process.
With --served one llama.cpp server runs the bundled SmolLM2 for the whole room and the app processes hold no
model (unless DECODESCOPE_MODELS names one too): DECODESCOPE_ROOM_SERVER tells them its address, and Step by
step and Beam tree open on it without a Connect click; the pages that need the weights say so in one line.

The run folder (default: the system's temporary folder, decodescope-room-PORT) holds the rendered haproxy.cfg,
each process's log and room.json: the address, and the process ids and ports of the proxy, the app processes
and the model server (a benchmark reads the app processes' ids from it). An app process that exits is started
again on its port (with a growing pause when it keeps dying at once); Ctrl-C or SIGTERM stops every process
the room started, by its id.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from engine.safe_text import printable
from room import address
from room.address import MAX_SERVERS, AddressError
from room.config import render, server_name

ROOT = Path(__file__).resolve().parent.parent
STOP_WAIT_S = 20            # a process asked to stop (SIGTERM) that has not exited by then is killed
QUICK_DEATH_S = 10          # a process that dies sooner than this after its start is restarted after a pause
MAX_PAUSE_S = 30


@dataclass
class Child:
    """One process the room started: its name in the logs, its port, the command that starts it again."""
    name: str
    port: int
    command: list
    env: dict
    log: Path
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    quick_deaths: int = 0
    due: float = 0.0            # when a process waiting for its restart is started

    def start(self) -> None:
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        self.started = time.monotonic()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _die_with_parent() -> None:
    """In the child: Linux sends it SIGTERM when the room's process dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)      # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop(children: list) -> None:
    """SIGTERM to each by its id, then wait; a process still there after STOP_WAIT_S gets SIGKILL."""
    for child in children:
        if child.running():
            child.proc.terminate()
    deadline = time.monotonic() + STOP_WAIT_S
    for child in children:
        if child.proc is None:
            continue
        try:
            child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def haproxy_binary() -> str | None:
    """Debian puts HAProxy in /usr/sbin, which a user's PATH may not name."""
    return shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy")
                                            if os.access(p, os.X_OK)), None)


def haproxy_check(text: str, binary: str | None = None) -> str:
    """'' when HAProxy takes the config `text` (haproxy -c), or is not installed here to ask; else its refusal,
    in one line. A host name that does not resolve on this machine is no refusal: the file may be meant for a
    proxy host that knows it."""
    binary = binary or haproxy_binary()
    if binary is None:
        return ""
    with tempfile.TemporaryDirectory(prefix="decodescope-room-check-") as folder:
        cfg = Path(folder) / "haproxy.cfg"
        cfg.write_text(text, encoding="utf-8")
        check = subprocess.run([binary, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=60)
    if check.returncode == 0:
        return ""
    alerts = [line for line in (check.stderr + check.stdout).splitlines() if "ALERT" in line]
    if alerts and all("could not resolve address" in line or "Failed to initialize server" in line
                      or "Fatal errors found in configuration" in line for line in alerts):
        return ""
    reason = next((line for line in alerts if "Fatal errors" not in line), (check.stderr or check.stdout).strip())
    return "HAProxy refuses the config: " + printable(" ".join(reason.split()))[:300]


def app_command(port: int) -> list:
    return [sys.executable, "-m", "ui.serve", "--server.address", "127.0.0.1", "--server.port", str(port),
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none", "--server.runOnSave", "false"]


def model_server_command(port: int, threads: int, n_ctx: int) -> list:
    """llama-cpp-python's server on the bundled SmolLM2 GGUF. It answers one request at a time (its server
    has no parallel slots, unlike llama.cpp's own), so its threads are the machine's to size: one
    forward pass at a time, as fast as the cores allow. It turns every context row's logits into
    log-probabilities for each answer, so its context costs on every request: 16 tokens with their top 20 took
    2.0 s at 512 and 4.1 s at 2,048 on two busy cores. A prompt past it gets the server's refusal, in one line.
    By default it cuts a streamed answer short when another request arrives (a class of 10 got 119 answers of
    1 to 3 tokens in a minute): here each request waits for its turn instead."""
    from engine.model import bundled_gguf_path

    return [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_gguf_path()), "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch",
            str(threads), "--interrupt_requests", "False", "--verbose", "false"]


def model_server_threads(replicas: int, cores: int | None = None) -> int:
    """The model server's threads: the cores the app processes' page building leaves (each takes about one
    while a class clicks), at least one, at most half the machine when the app processes take it all."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores - replicas) if cores > replicas else max(1, cores // 2)


def _answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class Room:
    def __init__(self, args, run_dir: Path):
        self.args, self.run_dir = args, run_dir
        self.stopping = threading.Event()
        self.secret = secrets.token_hex(32)
        self.apps: list = []
        self.proxy: Child | None = None
        self.model_server: Child | None = None
        self.model_url: str | None = None

    # ---- the pieces ------------------------------------------------------------------------------
    def app_ports(self) -> list:
        base = self.args.app_port_base
        if base == 0:
            return [free_port() for _ in range(self.args.replicas)]
        ports = list(range(base, base + self.args.replicas))
        taken = [p for p in ports if port_taken(p)]
        if taken:
            raise SystemExit(f"room: port {taken[0]} is taken on 127.0.0.1 (--app-port-base sets the first "
                             f"app process's port)")
        return ports

    def app_env(self) -> dict:
        env = dict(os.environ, PYTHONUNBUFFERED="1", STREAMLIT_SERVER_COOKIE_SECRET=self.secret)
        env["DECODESCOPE_THREADS"] = os.environ.get("DECODESCOPE_THREADS", "1")
        if self.model_url is not None:
            env["DECODESCOPE_ROOM_SERVER"] = self.model_url
            # the app processes hold no model unless DECODESCOPE_MODELS names one as well
            models = os.environ.get("DECODESCOPE_MODELS", "").strip()
            if not models:
                env["DECODESCOPE_MODELS"] = "served"
            elif "served" not in [m.strip().lower() for m in models.split(",")]:
                env["DECODESCOPE_MODELS"] = models + ",served"
        return env

    def start_model_server(self) -> None:
        port = free_port()
        threads = model_server_threads(self.args.replicas)
        self.model_server = Child("model", port, model_server_command(port, threads, self.args.model_ctx),
                                  dict(os.environ),
                                  self.run_dir / "model-server.log")
        self.model_server.start()
        self.model_url = f"http://127.0.0.1:{port}"
        print(f"room: llama.cpp server on the bundled SmolLM2 at {self.model_url} ({threads} threads, pid "
              f"{self.model_server.pid}); log {self.model_server.log}", flush=True)

    def start_apps(self) -> None:
        env = self.app_env()
        for i, port in enumerate(self.app_ports()):
            app = Child(server_name(i), port, app_command(port), env, self.run_dir / f"{server_name(i)}.log")
            app.start()
            self.apps.append(app)
            print(f"room: {app.name} on 127.0.0.1:{port} (pid {app.pid}); log {app.log}", flush=True)

    def start_proxy(self) -> None:
        binary = haproxy_binary()
        if binary is None:
            raise SystemExit("room: HAProxy is not installed (apt-get install haproxy; `make room` does it as root)")
        cfg = self.run_dir / "haproxy.cfg"
        text = render([f"127.0.0.1:{a.port}" for a in self.apps], self.args.port, self.args.host,
                      sticky=not self.args.no_sticky)
        problem = haproxy_check(text, binary)
        if problem:
            raise SystemExit(f"room: {problem}")
        cfg.write_text(text, encoding="utf-8")
        self.proxy = Child("haproxy", self.args.port, [binary, "-db", "-f", str(cfg)], dict(os.environ),
                           self.run_dir / "haproxy.log")
        self.proxy.start()

    def children(self) -> list:
        return [c for c in (self.proxy, *self.apps, self.model_server) if c is not None]

    # ---- what the room tells others -------------------------------------------------------------
    def url(self) -> str:
        host = self.args.host if self.args.host not in ("0.0.0.0", "::", "") else socket.gethostname()
        return f"http://{host}:{self.args.port}"

    def class_link(self) -> str:
        from urllib.parse import quote

        link = self.url() + "/step_by_step"
        return link + (f"?server={quote(self.model_url, safe=':/')}" if self.model_url else "")

    def write_status(self) -> None:
        status = {"url": self.url(), "link": self.class_link(), "pid": os.getpid(),
                  "proxy": {"pid": self.proxy.pid if self.proxy else None, "port": self.args.port,
                            "config": str(self.run_dir / "haproxy.cfg")},
                  "apps": [{"name": a.name, "port": a.port, "pid": a.pid if a.running() else None,
                            "restarts": a.restarts, "log": str(a.log)} for a in self.apps],
                  "model_server": ({"url": self.model_url, "pid": self.model_server.pid}
                                   if self.model_server else None)}
        path = self.run_dir / "room.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status, indent=1), encoding="utf-8")
        tmp.replace(path)

    # ---- the watch ---------------------------------------------------------------------------------
    def watch(self) -> int:
        """Restart app processes that exit until the room is asked to stop; 1 if the proxy or the model
        server exits (the room cannot go on without them)."""
        ready = False
        while not self.stopping.wait(0.5):
            changed = False
            for app in self.apps:
                if app.proc is not None and not app.running():
                    code = app.proc.returncode
                    quick = time.monotonic() - app.started < QUICK_DEATH_S
                    app.quick_deaths = app.quick_deaths + 1 if quick else 0
                    pause = min(MAX_PAUSE_S, 2 ** app.quick_deaths - 1) if quick else 0
                    print(f"room: {app.name} (pid {app.pid}) exited with code {code}; starting it again"
                          + (f" in {pause} s" if pause else ""), flush=True)
                    app.proc, app.due, changed = None, time.monotonic() + pause, True
                if app.proc is None and time.monotonic() >= app.due:
                    app.start()
                    app.restarts += 1
                    print(f"room: {app.name} started again (pid {app.pid})", flush=True)
                    changed = True
            for vital in (self.proxy, self.model_server):
                if vital is not None and not vital.running():
                    print(f"room: {vital.name} (pid {vital.pid}) exited with code {vital.proc.returncode}; "
                          f"stopping the room (its log: {vital.log})", flush=True)
                    return 1
            if not ready and all(_answering(f"http://127.0.0.1:{a.port}/_stcore/health") for a in self.apps):
                ready = changed = True
                print(f"room: ready, {len(self.apps)} app process(es) answering; the class opens "
                      f"{self.class_link()}", flush=True)
            if changed:
                self.write_status()
        return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, status 2: what was wrong, no usage block
        print(f"{self.prog}: error: {printable(message)}", file=sys.stderr)
        sys.exit(2)


def parse(argv=None):
    parser = _Parser(prog="python -m room", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2, help="app processes (about one core and 10 students each)")
    parser.add_argument("--port", type=int, default=8080, help="the port HAProxy listens on")
    parser.add_argument("--host", default="127.0.0.1", help="the address HAProxy listens on (0.0.0.0: every interface)")
    parser.add_argument("--app-port-base", type=int, default=None,
                        help="the first app process's port (the next ones follow; default PORT+1; 0: free ports)")
    parser.add_argument("--served", action="store_true",
                        help="start a llama.cpp server on the bundled model; Step by step opens on it")
    parser.add_argument("--model-ctx", type=int, default=1024,
                        help="the model server's context in tokens (prompt and new tokens; with --served)")
    parser.add_argument("--run-dir", type=Path, help="where the config, the logs and room.json go")
    parser.add_argument("--no-sticky", action="store_true",
                        help="no cookie: each request to the next process in turn (shows what the cookie is for)")
    parser.add_argument("--print-config", action="store_true",
                        help="print HAProxy's config and exit (with --servers: app processes on other hosts)")
    parser.add_argument("--servers", help="HOST:PORT of each app process, comma-separated (with --print-config)")
    args = parser.parse_args(argv)
    if not 1 <= args.replicas <= MAX_SERVERS:
        parser.error(f"--replicas: from 1 to {MAX_SERVERS} app processes, got {args.replicas}")
    try:
        address.port(args.port, "--port")
        args.host = address.host(args.host, "--host")
        if args.app_port_base is None:
            args.app_port_base = args.port + 1
        if args.app_port_base != 0:
            address.port_range(args.app_port_base, args.replicas,
                               "--app-port-base" if args.app_port_base != args.port + 1 else "--port")
        if args.servers is not None:
            if not args.print_config:
                raise AddressError("--servers: lists app processes on other hosts for --print-config; a room "
                                   "started here runs its own (--replicas)")
            args.servers = address.servers(args.servers)
    except AddressError as exc:
        parser.error(str(exc))
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.print_config:
        if args.app_port_base == 0 and not args.servers:
            print("python -m room: error: --app-port-base 0 (free ports) is for a room started here; with "
                  "--print-config name the ports (--app-port-base or --servers)", file=sys.stderr)
            return 2
        servers = args.servers or [f"127.0.0.1:{args.app_port_base + i}" for i in range(args.replicas)]
        text = render(servers, args.port, args.host, sticky=not args.no_sticky)
        problem = haproxy_check(text)
        if problem:
            print(f"python -m room: error: {problem}", file=sys.stderr)
            return 1
        print(text, end="")
        return 0
    run_dir = args.run_dir or Path(tempfile.gettempdir()) / f"decodescope-room-{args.port}"
    run_dir.mkdir(parents=True, exist_ok=True)
    room = Room(args, run_dir)

    def on_signal(signum, frame):
        room.stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    try:
        if args.served:
            room.start_model_server()
        room.start_apps()
        room.start_proxy()
        print(f"room: HAProxy on {args.host}:{args.port} (pid {room.proxy.pid}), config {run_dir / 'haproxy.cfg'}; "
              f"status in {run_dir / 'room.json'}; Ctrl-C stops the room", flush=True)
        room.write_status()
        code = room.watch()
    except SystemExit as exc:
        print(exc, file=sys.stderr, flush=True)
        code = 1
    finally:
        print("room: stopping " + ", ".join(f"{c.name} (pid {c.pid})" for c in room.children() if c.running()),
              flush=True)
        stop(room.children())
        (run_dir / "room.json").unlink(missing_ok=True)
    return code
