"""What the room writes into HAProxy's file as an address: a host name or an IP literal, and a port 1..65535.

HAProxy reads its file line by line and word by word: a newline, a space, a tab or a '#' in a server address
would end the line, add keywords to it (`backup`, `weight 0 disabled`, `ssl crt /etc/passwd`) or start a
line of the caller's choosing. So an address is parsed whole into its parts and written back from them; anything
else is refused in one line naming the argument it came from.
"""
from __future__ import annotations

import ipaddress
import re

MAX_PORT = 65535
MAX_SERVERS = 64            # app processes behind one proxy: about a core and ten students each
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
QUOTE = 40                  # characters of a refused value quoted back


class AddressError(ValueError):
    """An argument that is not an address; the message names the argument and quotes the value, shortened."""


def _quoted(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= QUOTE else shown[:QUOTE - 1] + "…"


def host(text: str, what: str) -> str:
    """`text` as HAProxy may read it: an IPv4 or IPv6 literal (written as Python writes it back) or a host name
    of letters, digits, hyphens and dots (RFC 1123: labels of 1-63 characters, 253 in all)."""
    if not isinstance(text, str) or not text:
        raise AddressError(f"{what}: give a host name or an IP address, got {_quoted(str(text))}")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    name = text[:-1] if text.endswith(".") else text
    if len(name) <= 253 and name.isascii() and all(_LABEL.fullmatch(label) for label in name.split(".")) \
            and not name.replace(".", "").isdigit():
        return text
    raise AddressError(f"{what}: {_quoted(text)} is not a host name or an IP address (a name holds letters, "
                       "digits, '-' and '.'; nothing else may go into HAProxy's file)")


def port(value, what: str) -> int:
    """A port 1..65535, from a number or the digits of one (no sign, no spaces, no service name)."""
    if isinstance(value, bool):
        raise AddressError(f"{what}: a port is a number from 1 to {MAX_PORT}, got {_quoted(str(value))}")
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit() and len(value) <= 5):
            raise AddressError(f"{what}: a port is a number from 1 to {MAX_PORT}, got {_quoted(value)}")
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_PORT:
        raise AddressError(f"{what}: a port is a number from 1 to {MAX_PORT}, got {_quoted(str(value))}")
    return value


_NOT_IN_ADDRESS = re.compile(r"[^A-Za-z0-9.:\[\]-]")


def server(text: str, what: str) -> tuple:
    """'HOST:PORT' ('[V6]:PORT' for an IPv6 literal) checked whole: (host, port)."""
    if not isinstance(text, str):
        raise AddressError(f"{what}: give HOST:PORT, got {_quoted(str(text))}")
    stray = _NOT_IN_ADDRESS.search(text)
    if stray is not None:
        raise AddressError(f"{what}: {_quoted(text)} holds {stray.group()!r} (character {stray.start() + 1}); an "
                           "address is HOST:PORT, of letters, digits, '-', '.' and ':' only")
    if text.startswith("["):
        found = re.fullmatch(r"\[([^\]]*)\]:(.*)", text, re.S)
        if found is None:
            raise AddressError(f"{what}: {_quoted(text)} is not [IPv6]:PORT")
        name, number = found.groups()
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            raise AddressError(f"{what}: {_quoted(name)} in brackets is not an IPv6 address") from None
    else:
        name, colon, number = text.rpartition(":")
        if not colon or not name:
            raise AddressError(f"{what}: {_quoted(text)} is not HOST:PORT (e.g. 10.0.0.5:8501)")
        if ":" in name:
            raise AddressError(f"{what}: {_quoted(text)}: write an IPv6 address in brackets, [::1]:8501")
    return host(name, what), port(number, what)


def written(host_name: str, number: int) -> str:
    """HOST:PORT as a person writes it, with an IPv6 literal in brackets ([::1]:8501)."""
    return f"[{host_name}]:{number}" if ":" in host_name else f"{host_name}:{number}"


def for_haproxy(host_name: str, number: int) -> str:
    """HOST:PORT as HAProxy's file takes it: it splits an address from its port at the last colon, so an IPv6
    literal is written bare (::1:8501)."""
    return f"{host_name}:{number}"


def servers(text: str, what: str = "--servers") -> list:
    """A comma-separated list of HOST:PORT, each checked, at most MAX_SERVERS, none twice; as `written`."""
    items = [item.strip(" ") for item in str(text).split(",")]
    items = [item for item in items if item]          # "a:1, b:2," as typed
    if not items:
        raise AddressError(f"{what}: give at least one HOST:PORT")
    if len(items) > MAX_SERVERS:
        raise AddressError(f"{what}: {len(items):,} servers; a room has at most {MAX_SERVERS}")
    checked = [written(*server(item, f"{what} (server {i + 1})")) for i, item in enumerate(items)]
    repeated = next((s for i, s in enumerate(checked) if s in checked[:i]), None)
    if repeated is not None:
        raise AddressError(f"{what}: {repeated} is named twice")
    return checked


def port_range(base: int, count: int, what: str = "--app-port-base") -> list:
    """`count` ports from `base`, all of them real ports."""
    port(base, what)
    if base + count - 1 > MAX_PORT:
        raise AddressError(f"{what}: {count} app processes from port {base} would reach port {base + count - 1}, "
                           f"past {MAX_PORT}; start lower")
    return list(range(base, base + count))
