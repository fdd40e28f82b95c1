"""HAProxy's file for a room, rendered from room/haproxy.cfg.template: one server line per app process.

The template is the whole configuration (stickiness, the websocket's timeout, health checks); only the
address it listens on and the server lines change with the room, so the file rendered for replicas on
this machine is the one a proxy host runs with replicas on other hosts (`--servers HOST:PORT,...`).
"""
from __future__ import annotations

from pathlib import Path
from string import Template

from room import address
from room.address import MAX_SERVERS, AddressError

TEMPLATE = Path(__file__).resolve().parent / "haproxy.cfg.template"
COOKIE = "SERVERID"


def server_name(index: int) -> str:
    """The name of the index-th app process (0-based) in the config, its logs and the SERVERID cookie."""
    return f"app{index + 1}"


def render(servers: list, port: int, bind: str = "127.0.0.1", sticky: bool = True) -> str:
    """The config for app processes at `servers` ("host:port" each), HAProxy listening on bind:port. Every
    address is checked whole (room.address) and written back from its parts: nothing else reaches the file.

    A sticky room balances by least connections: a browser with the cookie goes back to its process, and a new
    one (or one whose process died) to the process holding the fewest connections. Each open page holds one
    websocket, so that is the process with the fewest students: a process started again after a crash takes
    the next students instead of every other one. sticky=False leaves the cookie out and sends each request to
    the next server in turn: a room in which a session does not stay on its process, to show what the cookie
    is for."""
    if not servers:
        raise AddressError("a room needs at least one app process")
    if len(servers) > MAX_SERVERS:
        raise AddressError(f"a room has at most {MAX_SERVERS} app processes, got {len(servers):,}")
    checked = [address.for_haproxy(*address.server(s, f"server {i + 1}")) for i, s in enumerate(servers)]
    listen = address.for_haproxy(address.host(bind, "the address HAProxy listens on"),
                                 address.port(port, "the port HAProxy listens on"))
    lines = [f"    server {server_name(i)} {where} check" + (f" cookie {server_name(i)}" if sticky else "")
             for i, where in enumerate(checked)]
    cookie = (f"cookie {COOKIE} insert indirect nocache" if sticky
              else "# no cookie: every request goes to the next server in turn (a room without stickiness)")
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        listen=listen, balance="leastconn" if sticky else "roundrobin", cookie=cookie, servers="\n".join(lines))
