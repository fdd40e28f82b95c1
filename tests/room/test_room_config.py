"""HAProxy's file for a room: one server per app process, the cookie only when sticky, and a file HAProxy takes."""
import shutil
import subprocess

import pytest

from room.config import render
from room.launch import model_server_threads, parse


def _lines(text: str) -> list:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_one_server_line_per_app_process_each_named_in_the_cookie():
    lines = _lines(render(["10.0.0.5:8501", "10.0.0.6:8501", "10.0.0.7:8502"], 8080, "0.0.0.0"))
    assert [line for line in lines if line.startswith("server ")] == [
        "server app1 10.0.0.5:8501 check cookie app1",
        "server app2 10.0.0.6:8501 check cookie app2",
        "server app3 10.0.0.7:8502 check cookie app3"]
    assert "bind 0.0.0.0:8080" in lines
    assert "cookie SERVERID insert indirect nocache" in lines
    # a browser whose process is down goes to another; the websocket's idle time is the tunnel's
    assert "option redispatch" in lines and "timeout tunnel 1h" in lines
    assert "option httpchk GET /_stcore/health" in lines


def test_without_stickiness_no_cookie_at_all():
    text = render(["127.0.0.1:1", "127.0.0.1:2"], 9000, sticky=False)
    assert "SERVERID" not in text
    assert [line for line in _lines(text) if line.startswith("server ")] == [
        "server app1 127.0.0.1:1 check", "server app2 127.0.0.1:2 check"]


def test_a_room_needs_a_process():
    with pytest.raises(ValueError):
        render([], 8080)


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="HAProxy is not installed (apt-get install haproxy)")
@pytest.mark.process
def test_haproxy_takes_the_rendered_file(tmp_path):
    for sticky in (True, False):
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(render(["127.0.0.1:8081", "127.0.0.1:8082"], 8080, sticky=sticky))
        check = subprocess.run(["haproxy", "-c", "-q", "-f", str(cfg)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_model_server_threads_leave_a_core_per_app_process():
    assert model_server_threads(2, cores=8) == 6
    assert model_server_threads(2, cores=2) == 1        # the app processes take both: half the machine
    assert model_server_threads(1, cores=1) == 1
    assert model_server_threads(4, cores=16) == 12


def test_app_ports_follow_the_proxy_port_unless_given():
    assert parse(["--port", "9000"]).app_port_base == 9001
    assert parse(["--port", "9000", "--app-port-base", "0"]).app_port_base == 0


def test_the_model_server_lets_each_request_finish():
    """llama-cpp-python cuts a streamed answer short when another request arrives unless told not to: a class
    sharing one server would see runs of one or two tokens."""
    from room.launch import model_server_command

    command = model_server_command(9000, threads=3, n_ctx=1024)
    assert command[command.index("--interrupt_requests") + 1] == "False"
    assert command[command.index("--n_threads") + 1] == "3" and command[command.index("--n_ctx") + 1] == "1024"
    assert command[command.index("--host") + 1] == "127.0.0.1"


# ---- what reaches HAProxy's file ------------------------------------------------------------------------------
def _print_config(capsys, *argv):
    from room.launch import main

    capsys.readouterr()
    try:
        code = main(["--print-config", *argv])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


INJECTIONS = [
    (["--servers", "127.0.0.1:8501\n    server evil 10.6.6.6:80"], ["--servers", "'\\n'"]),
    (["--servers", "127.0.0.1:8501\r    server evil 10.6.6.6:80"], ["--servers", "'\\r'"]),
    (["--servers", "127.0.0.1:8501\tbackup"], ["--servers", "'\\t'"]),
    (["--servers", "127.0.0.1:8501 backup"], ["--servers", "' '"]),
    (["--servers", "127.0.0.1:8501 weight 0 disabled"], ["--servers", "' '"]),
    (["--servers", "10.0.0.5:8501,127.0.0.1:8501#x"], ["--servers (server 2)", "'#'"]),
    (["--host", "0.0.0.0:1 ssl crt /etc/passwd"], ["--host"]),
    (["--host", "0.0.0.0\n    server evil 10.6.6.6:80"], ["--host"]),
    (["--host", "#"], ["--host"]),
    (["--servers", "127.0.0.1:0"], ["--servers", "1 to 65535", "'0'"]),
    (["--servers", "127.0.0.1:70000"], ["--servers", "'70000'"]),
    (["--servers", "127.0.0.1:http"], ["--servers", "'http'"]),
    (["--servers", "127.0.0.1:"], ["--servers", "''"]),
    (["--servers", "127.0.0.1"], ["--servers", "HOST:PORT"]),
    (["--servers", "127.0.0.1:+80"], ["--servers"]),
    (["--servers", "127.0.0.1:٨٠"], ["--servers"]),                  # digits Python's int() reads, HAProxy not
    (["--servers", "::1:8501"], ["--servers", "brackets"]),
    (["--servers", "[::1 backup]:8501"], ["--servers", "' '"]),
    (["--servers", "under_score:80"], ["--servers", "'_'"]),
    (["--servers", "bad-.example:80"], ["--servers", "not a host name"]),
    (["--servers", "1.2.3:80"], ["--servers", "not a host name"]),
    (["--servers", "a:1,a:1"], ["--servers", "named twice"]),
    (["--servers", ",".join(f"10.0.0.1:{p}" for p in range(1, 66))], ["--servers", "at most 64"]),
    (["--port", "0"], ["--port"]),
    (["--port", "70000"], ["--port"]),
    (["--replicas", "3", "--app-port-base", "65534"], ["--app-port-base", "65536"]),
    (["--replicas", "2", "--port", "65535"], ["--port"]),            # the app processes would start at 65536
    (["--replicas", "100000"], ["--replicas"]),
]


@pytest.mark.parametrize("argv, words", INJECTIONS)
def test_an_address_that_is_not_one_is_refused_in_one_line(capsys, argv, words):
    code, out, err = _print_config(capsys, *argv)
    assert code == 2 and out == "", out
    assert len(err.splitlines()) == 1 and err.startswith("python -m room: error: "), err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize("servers", [["127.0.0.1:8501\n    server evil 10.6.6.6:80"], ["10.0.0.1:8501 backup"],
                                     ["10.0.0.1:0"], ["10.0.0.1"]])
def test_render_itself_writes_only_addresses(servers):
    """render() is what every path to the file goes through: it checks each address again."""
    from room.address import AddressError

    with pytest.raises(AddressError):
        render(servers, 8080)
    with pytest.raises(AddressError):
        render(["127.0.0.1:8501"], 8080, bind="0.0.0.0 ssl crt /etc/passwd")


def test_a_room_balances_new_browsers_by_least_connections_and_keeps_the_cookie():
    """After a crash the moved students stay where the cookie now sends them; a new browser goes to the process
    with the fewest open pages (the one started again), not to every other process in turn."""
    lines = _lines(render(["10.0.0.5:8501", "10.0.0.6:8501"], 8080))
    assert "balance leastconn" in lines and "cookie SERVERID insert indirect nocache" in lines
    assert "server app1 10.0.0.5:8501 check cookie app1" in lines
    # without the cookie the room shows what stickiness is for: each request to the next process in turn
    assert "balance roundrobin" in _lines(render(["10.0.0.5:8501", "10.0.0.6:8501"], 8080, sticky=False))


def test_good_addresses_are_written_as_haproxy_reads_them(capsys):
    code, out, err = _print_config(capsys, "--servers", "[::1]:8501, localhost:8502,10.0.0.7:1,", "--host", "::")
    assert code == 0, err
    servers = [line for line in _lines(out) if line.startswith("server ")]
    assert servers == ["server app1 ::1:8501 check cookie app1", "server app2 localhost:8502 check cookie app2",
                       "server app3 10.0.0.7:1 check cookie app3"]
    assert "bind :::8080" in _lines(out)


HAPROXY = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy")
                                           if shutil.which(p)), None)
needs_haproxy = pytest.mark.skipif(HAPROXY is None, reason="HAProxy is not installed (apt-get install haproxy)")
WRITTEN = [[], ["--no-sticky"], ["--replicas", "5", "--port", "9000"], ["--host", "0.0.0.0"], ["--host", "::"],
           ["--servers", "[::1]:8501,localhost:8502,10.0.0.7:65535"], ["--replicas", "64", "--app-port-base", "65472"]]


@needs_haproxy
@pytest.mark.process
@pytest.mark.parametrize("argv", WRITTEN)
def test_haproxy_takes_every_file_the_room_writes(capsys, tmp_path, argv):
    code, out, err = _print_config(capsys, *argv)
    assert code == 0 and err == "", err
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(out)
    check = subprocess.run([HAPROXY, "-c", "-f", str(cfg)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


@needs_haproxy
@pytest.mark.process
def test_a_config_haproxy_refuses_is_named_in_one_line():
    from room.launch import haproxy_check

    good = render(["127.0.0.1:8081"], 8080)
    assert haproxy_check(good, HAPROXY) == ""
    problem = haproxy_check(good.replace("balance leastconn", "balance nosuchalgorithm"), HAPROXY)
    assert problem.startswith("HAProxy refuses the config: ") and "\n" not in problem
    # a name this machine cannot resolve is the proxy host's business, not a refusal
    assert haproxy_check(render(["no-such-host.invalid:8501"], 8080), HAPROXY) == ""


@needs_haproxy
@pytest.mark.process
def test_a_new_browser_goes_to_the_process_with_the_fewest_open_pages(tmp_path):
    """Two app processes stand in as small HTTP servers; one holds an open page (a request kept open, as a
    websocket is), pinned there by its cookie. Each new browser then goes to the other process, every time:
    round robin would send every other one to the busy process."""
    import threading
    import time
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from room.launch import free_port

    release, arrived = threading.Event(), threading.Event()

    def app(name):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/hold":
                    arrived.set()
                    release.wait(120)
                self.send_response(200)
                self.send_header("Content-Length", str(len(name)))
                self.end_headers()
                self.wfile.write(name.encode())

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    apps = [app("app1"), app("app2")]
    port = free_port()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(render([f"127.0.0.1:{a.server_address[1]}" for a in apps], port))
    proxy = subprocess.Popen([HAPROXY, "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    held = None
    try:
        def get(path, cookie=None):
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                             headers={"Cookie": f"SERVERID={cookie}"} if cookie else {})
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.read().decode()

        up = set()
        for _ in range(200):                         # both servers answer their health checks (every 0.5-2 s)
            try:
                up = {get("/") for _ in range(4)}
            except OSError:
                up = set()
            if up == {"app1", "app2"}:
                break
            time.sleep(0.1)
        assert up == {"app1", "app2"}
        held = threading.Thread(target=get, args=("/hold", "app1"), daemon=True)
        held.start()
        assert arrived.wait(30)                      # the held page is open on app1 before the new browsers come
        assert [get("/") for _ in range(6)] == ["app2"] * 6
    finally:
        release.set()
        if held is not None:
            held.join(30)
        proxy.terminate()
        proxy.wait(30)
        for a in apps:
            a.shutdown()
