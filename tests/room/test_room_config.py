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
