"""`python -m engine lesson TRACE.json --out lesson.html [--lang zh] [--title ...] [--notes FILE]`.

The trace is read only through Trace.from_json, so a file the app refuses is refused here with the same line.
Every flag is checked before the trace's module (and PyTorch with it) is imported.
"""
from __future__ import annotations

import os
import sys

from engine.cli.files import read_text_file
from ..errors import ConfigError, DecodeScopeError
from engine.cli.output import check_target, say_error, write_file
from .notes import MAX_NOTES_FILE, check_title, parse_notes
from .page import LANGUAGES, lesson_html


def add_lesson_parser(sub, formatter) -> None:
    p = sub.add_parser("lesson", help="write a trace as one HTML file that steps through the run, offline",
                       formatter_class=formatter,
                       description="Write a recorded run (a --json trace, or one downloaded from the app) as one "
                                   "self-contained HTML file: it opens from disk or any web host, in any browser, "
                                   "and sends no request.")
    p.add_argument("trace", metavar="TRACE", help="a DecodeScope trace (JSON); '-' for stdin")
    p.add_argument("--out", required=True, metavar="PATH", help="the HTML file to write")
    p.add_argument("--lang", default="en", choices=LANGUAGES, help="the language it opens in (it can switch)")
    p.add_argument("--title", default="", help="the lesson's title (one line)")
    p.add_argument("--notes", metavar="FILE", default=None,
                   help='a JSON file of notes by step, counted from 1: {"1": "note for step 1", ...}')


def read_trace(path: str):
    """The checked Trace in `path`: Trace.from_json reads it whole, with the app's own messages."""
    from ..trace import MAX_TRACE_BYTES, Trace
    from ..trace.reader import check_size

    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_TRACE_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_TRACE_BYTES + 1)
            if len(data) > MAX_TRACE_BYTES:
                check_size(os.path.getsize(path))      # the size the app would name for the same file
    except OSError as exc:
        raise ConfigError("trace", f"TRACE: cannot read {path}: {exc.strerror}") from None
    return Trace.from_json(data)


def lesson_main(args) -> int:
    try:
        title = check_title(args.title)
        if args.out == "-":
            raise ConfigError("out", "--out: give a file name; the lesson is a whole HTML file")
        check_target(args.out, "--out")
        notes_text = None
        if args.notes is not None:
            notes_text = read_text_file(args.notes, flag="--notes", field="notes", limit=MAX_NOTES_FILE,
                                        too_big=f"over {MAX_NOTES_FILE // 1024} KiB; notes are a few lines a step")
        trace = read_trace(args.trace)
        notes = parse_notes(notes_text, len(trace.steps)) if notes_text is not None else {}
        html = lesson_html(trace, lang=args.lang, title=title, notes=notes)
        write_file(args.out, html)
    except DecodeScopeError as exc:
        return say_error(exc)
    except KeyboardInterrupt:
        return 130
    print(f"lesson written to {args.out} ({len(html.encode('utf-8')) / 1e6:.2f} MB, {len(trace.steps)} steps)",
          file=sys.stderr)
    return 0
