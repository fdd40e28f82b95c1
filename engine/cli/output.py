"""What the command line writes, to its standard output and to a --json file, with every way that can fail
said in one line: a full disk, a pipe its reader closed, a standard output that was closed, a named pipe
nobody reads. A file is written beside its target and renamed into place, so a failed write never leaves a
half-written file that looks whole."""
from __future__ import annotations

import contextlib
import errno
import os
import select
import stat
import sys
import tempfile
import time
from pathlib import Path

from engine.errors import ConfigError, DecodeScopeError
from engine.safe_text import clean_text, printable

PIPE_WAIT_S = 30.0          # how long a named pipe may go without a reader, or without reading, before we give up


def say_error(exc: BaseException) -> int:
    """The one `error:` line on stderr; the exit status 2."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(f"error: {printable(exc)}\n")
        sys.stderr.flush()
    return 2


def check_target(path: str | None, flag: str) -> None:
    """Refuse a path given to `flag` (--json, --out) that cannot be written, before the work and not after it."""
    if path is None or path == "-":
        return
    target, field = Path(path), flag.strip("-")
    folder = target.parent
    if target.is_dir():
        raise ConfigError(field, f"{flag}: {path} is a folder; give a file name")
    if not folder.is_dir():
        raise ConfigError(field, f"{flag}: cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ConfigError(field, f"{flag}: cannot write {path}: permission denied")
    if target.is_file() and _read_only(target):
        raise ConfigError(field, f"{flag}: {path} is read-only (no one may write it); give another file name, "
                                 "or make it writable first")
    if _read_only(folder):
        raise ConfigError(field, f"{flag}: cannot write {path}: the folder {folder} is read-only (no one may write "
                                 "in it)")


def _read_only(path: Path) -> bool:
    """No write permission for anyone: a file or folder someone protected. os.access alone lets an administrator
    through (root may write anything), and the file would be replaced, its protection with it."""
    return not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def write_stdout(text: str) -> None:
    """Write and flush `text`; DecodeScopeError with one line when standard output cannot take it. After a
    failure, standard output points at /dev/null, so Python's own flush at exit adds no second message."""
    if sys.stdout is None:
        raise DecodeScopeError("standard output is closed; nothing could be written")
    try:
        sys.stdout.write(clean_text(text))
        sys.stdout.flush()
    except OSError as exc:
        _silence_stdout()
        if exc.errno == errno.EPIPE:
            raise DecodeScopeError("standard output was closed before all of it was written "
                                   "(the program reading it stopped early)") from None
        raise DecodeScopeError(f"cannot write to standard output: {exc.strerror or exc}") from None
    except ValueError:                 # the stream object was closed
        raise DecodeScopeError("standard output is closed; nothing could be written") from None


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def write_file(path: str, text: str, flag: str = "--json") -> None:
    """Write `text` (UTF-8) to `path`, given to `flag` (named in every failure). A regular file (or a new one) is
    written to a temporary file beside it and renamed over it, keeping the old file's permissions; a named pipe
    gets a bounded wait for its reader; a device is written as it is."""
    data = clean_text(text).encode("utf-8")
    try:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISFIFO(mode):
            _write_pipe(path, data, flag)
        elif mode is not None and not stat.S_ISREG(mode):
            with open(path, "wb") as fh:          # /dev/stdout, /dev/full, a terminal: no file to replace
                fh.write(data)
        else:
            _replace(os.path.realpath(path), data, None if mode is None else stat.S_IMODE(mode))
    except OSError as exc:
        raise DecodeScopeError(f"{flag}: cannot write {path}: {exc.strerror or exc}") from None


def _replace(target: str, data: bytes, mode: int | None = None) -> None:
    """`data` into a new file beside `target`, renamed over it: with `target`'s own permissions (`mode`) when it
    existed (a private file stays private), else those a new file gets."""
    folder, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_pipe(path: str, data: bytes, flag: str) -> None:
    """A named pipe blocks a writer until someone reads it: open it non-blocking, wait at most PIPE_WAIT_S
    for a reader and for each part of the text to be taken, then give up with one line."""
    ends = time.monotonic() + PIPE_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:           # ENXIO: no reader yet
                raise
            if time.monotonic() >= ends:
                raise DecodeScopeError(f"{flag}: {path} is a named pipe and nothing read from it within "
                                       f"{PIPE_WAIT_S:g} s") from None
            time.sleep(0.05)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        view = memoryview(data)
        while view:
            if not poller.poll(int(PIPE_WAIT_S * 1000)):
                raise DecodeScopeError(f"{flag}: {path} is a named pipe whose reader stopped reading for "
                                       f"{PIPE_WAIT_S:g} s")
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue
    finally:
        os.close(fd)
