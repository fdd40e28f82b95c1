"""HAProxy's file for a room, rendered from room/haproxy.cfg.template: one server line per app process.

The template is the whole configuration (stickiness, the websocket's timeout, health checks); only the
address it listens on and the server lines change with the room, so the file rendered for replicas on
this machine is the one a proxy host runs with replicas on other hosts (`--servers HOST:PORT,...`).
"""
from __future__ import annotations

from pathlib import Path
from string import Template

TEMPLATE = Path(__file__).resolve().parent / "haproxy.cfg.template"
COOKIE = "SERVERID"


def server_name(index: int) -> str:
    """The name of the index-th app process (0-based) in the config, its logs and the SERVERID cookie."""
    return f"app{index + 1}"


def render(servers: list, port: int, bind: str = "127.0.0.1", sticky: bool = True) -> str:
    """The config for app processes at `servers` ("host:port" each), HAProxy listening on bind:port.

    sticky=False leaves the cookie out (each request to the next server in turn): a room in which a
    session does not stay on its process, to show what the cookie is for."""
    if not servers:
        raise ValueError("a room needs at least one app process")
    lines = [f"    server {server_name(i)} {address} check" + (f" cookie {server_name(i)}" if sticky else "")
             for i, address in enumerate(servers)]
    cookie = (f"cookie {COOKIE} insert indirect nocache" if sticky
              else "# no cookie: every request goes to the next server in turn (a room without stickiness)")
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        bind=bind, port=port, balance="roundrobin", cookie=cookie, servers="\n".join(lines))
