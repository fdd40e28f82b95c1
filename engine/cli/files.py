"""What the CLI reads from a file the user names (a prompt, a grammar): bounded, UTF-8, and every failure one
line that names the flag and the file. A named pipe is waited on for a while, never forever."""
from __future__ import annotations

import os
import select
import stat
import sys

from engine.errors import ConfigError
from engine.tokens import unpaired_surrogate
from engine.cli import output

MAX_PROMPT_FILE = 10 * 1024 * 1024   # no model's context holds more; a bigger file is a wrong file


def read_text_file(path: str, *, flag: str, field: str, limit: int, too_big: str) -> str:
    """The text of `path` ("-": stdin) for the option `flag`, at most `limit` bytes; ConfigError(field) naming
    a missing or unreadable file, one over the limit ("{path} is {too_big}"), or bytes that are not UTF-8."""
    try:
        if path == "-":
            if sys.stdin.isatty():
                print("reading from the terminal; end it with Ctrl-D", file=sys.stderr)
            data = sys.stdin.buffer.read(limit + 1)
        elif stat.S_ISFIFO(os.stat(path).st_mode):
            data = _read_pipe(path, flag, field, limit)
        else:
            with open(path, "rb") as fh:
                data = fh.read(limit + 1)
    except OSError as exc:
        raise ConfigError(field, f"{flag}: cannot read {path}: {exc.strerror}") from None
    if len(data) > limit:
        raise ConfigError(field, f"{flag}: {path} is {too_big}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(field, f"{flag}: {path} is not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def _read_pipe(path: str, flag: str, field: str, limit: int) -> bytes:
    """Read a named pipe without hanging forever: opening one blocks until a writer comes, so open it
    non-blocking, say that we wait, and give up after output.PIPE_WAIT_S seconds
    of silence (the one knob for reading and writing pipes)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(0):
            print(f"waiting up to {output.PIPE_WAIT_S:g} s for text on {path} (a named pipe)", file=sys.stderr)
            if not poller.poll(int(output.PIPE_WAIT_S * 1000)):
                raise ConfigError(field, f"{flag}: {path} is a named pipe and nothing was written "
                                         f"to it within {output.PIPE_WAIT_S:g} s")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_argument_text(text: str, *, flag: str, field: str, hint: str = "check the terminal's encoding") -> None:
    """An argument that is not text: a byte that was not UTF-8 (Python keeps it as a lone surrogate, U+DC80 to
    U+DCFF) or a lone surrogate typed as an escape; ConfigError(field) naming the flag, the byte and where."""
    bad = unpaired_surrogate(text)
    if bad is None:
        return
    code = ord(text[bad])
    if 0xDC80 <= code <= 0xDCFF:          # how Python keeps an undecodable byte of an argument
        raise ConfigError(field, f"{flag}: is not UTF-8 text (byte 0x{code - 0xDC00:02X} at character "
                                 f"{bad + 1:,}); {hint}")
    raise ConfigError(field, f"{flag}: character {bad + 1:,} is {text[bad]!a}, half of a UTF-16 pair, "
                             "not text; remove it")
