"""`python -m engine lesson TRACE.json --out lesson.html [--lang zh] [--title ...] [--notes FILE]`.

The trace is read only through Trace.from_json, so a file the app refuses is refused here with the same line.
Every flag is checked before the trace's module (and PyTorch with it) is imported.
"""
from __future__ import annotations

import os
import re
import sys

from engine.cli.files import check_argument_text, read_text_file
from ..errors import ConfigError, DecodeScopeError
from engine.cli.output import check_target, say_error, write_file
from ..safe_text import clean_text, printable
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
    """The checked Trace in `path`: Trace.from_json reads it whole, with the app's own messages. A file past the
    size the app opens is refused with what would fit (the CLI can record more than that: 1,024 steps of 200
    candidates is about 39 MB)."""
    from ..trace import MAX_TRACE_BYTES, Trace

    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_TRACE_BYTES + 1)
            size = None                  # a pipe's whole size is not known: only that it is over the limit
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_TRACE_BYTES + 1)
            size = os.path.getsize(path)
    except OSError as exc:
        raise ConfigError("trace", f"TRACE: cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_TRACE_BYTES:
        shown = f"{size / 1e6:,.1f} MB" if size else f"over {MAX_TRACE_BYTES / 1e6:g} MB"
        raise ConfigError("trace", f"TRACE: {'standard input' if path == '-' else path} is {shown}; a lesson is made "
                                   f"from a trace of at most {MAX_TRACE_BYTES / 1e6:g} MB, as the app opens: "
                                   + what_would_fit(data, MAX_TRACE_BYTES / size if size else None))
    return Trace.from_json(data)


_SETTING = re.compile(rb'"(strategy|max_new_tokens|top_n|num_beams)": ("\w+"|\d{1,7})')


def what_would_fit(head: bytes, share: float | None) -> str:
    """Advice for a trace `1 / share` times too big: record fewer steps or fewer candidates a step (a trace's
    size grows with their product). The settings are read from the file's config, near its start, and only
    quoted back in this advice; a file that does not show them, or whose size is not known, gets less."""
    if share is None:
        return "decode again recording less (fewer --max-new-tokens, a smaller --top-n, fewer beams)"
    found = {}
    for name, value in _SETTING.findall(head[:2_000_000]):
        found.setdefault(name.decode(), value.decode().strip('"'))
    keep = share * 0.9                  # a margin: texts and stages vary from step to step
    if "max_new_tokens" not in found or "top_n" not in found:
        return f"decode again recording about {keep:.0%} as much (fewer --max-new-tokens, a smaller --top-n)"
    steps, top_n = int(found["max_new_tokens"]), int(found["top_n"])
    options = [f"--max-new-tokens {max(1, int(steps * keep))}"]
    if found.get("strategy") == "beam":
        options.append(f"fewer than {found.get('num_beams', '?')} beams")
    elif top_n > 1:
        options.append(f"--top-n {max(1, int(top_n * keep))}")
    return (f"decode again recording about {keep:.0%} as much (this run: --max-new-tokens {steps}, --top-n {top_n}"
            + (f", {found.get('num_beams', '?')} beams" if found.get("strategy") == "beam" else "")
            + f"; {' or '.join(options)} would fit)")


def same_file(a: str, b: str) -> bool:
    """True when the paths name one file (a link, another spelling of the path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def lesson_main(args) -> int:
    try:
        check_argument_text(args.title, flag="--title", field="title")
        title = check_title(args.title)
        if args.out == "-":
            raise ConfigError("out", "--out: give a file name; the lesson is a whole HTML file")
        for flag, given in (("TRACE", args.trace), ("--notes", args.notes)):
            if given not in (None, "-") and same_file(args.out, given):
                raise ConfigError("out", f"--out: {args.out} is the file given as {flag}; the lesson would replace "
                                         "it; give the lesson another name")
        check_target(args.out, "--out")
        notes_text = None
        if args.notes is not None:
            notes_text = read_text_file(args.notes, flag="--notes", field="notes", limit=MAX_NOTES_FILE,
                                        too_big=f"over {MAX_NOTES_FILE // 1024} KiB; notes are a few lines a step")
        trace = read_trace(args.trace)
        notes = parse_notes(notes_text, len(trace.steps)) if notes_text is not None else {}
        html = lesson_html(trace, lang=args.lang, title=title, notes=notes)
        write_file(args.out, html, "--out")
    except DecodeScopeError as exc:
        return say_error(exc)
    except KeyboardInterrupt:
        return 130
    print(f"lesson written to {printable(args.out)} ({len(clean_text(html).encode('utf-8')) / 1e6:.2f} MB, "
          f"{len(trace.steps)} steps)", file=sys.stderr)
    return 0
