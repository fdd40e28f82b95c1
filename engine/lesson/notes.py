"""A teacher's words on a lesson: a title, and a note per step from a small JSON file {"1": "note", ...}.

Bounded and checked whole before anything is written: a note for a step the run does not have, or a file that
is not such an object, is one line naming what was wrong.
"""
from __future__ import annotations

import json

from ..errors import ConfigError, quoted
from engine.tokens import unpaired_surrogate

MAX_TITLE = 200              # characters
MAX_NOTE = 2_000             # characters per note
MAX_NOTES_FILE = 256 * 1024  # bytes: a note on each of 1,024 steps, with room


def check_title(title: str | None) -> str:
    """The title, stripped; '' for none. A title is one line of at most MAX_TITLE characters."""
    title = (title or "").strip()
    if len(title) > MAX_TITLE:
        raise ConfigError("title", f"--title: is {len(title):,} characters; at most {MAX_TITLE} fit a heading")
    if any(ch in title for ch in "\r\n"):
        raise ConfigError("title", "--title: is more than one line; a title is one line")
    return title


def parse_notes(text: str, steps: int, source: str = "--notes") -> dict:
    """{"<step>": note} from JSON text; steps are counted from 1, as on every page, up to `steps`."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError("notes", f"{source}: is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise ConfigError("notes", f'{source}: must be a JSON object of step number to note, like {{"1": "..."}}')
    notes = {}
    for key, note in data.items():
        if not (key.isascii() and key.isdigit() and 1 <= int(key) <= steps):
            raise ConfigError("notes", f"{source}: {quoted(key)} is not a step of this run (1..{steps})")
        if not isinstance(note, str):
            raise ConfigError("notes", f"{source}: the note for step {key} must be text, not {type(note).__name__}")
        bad = unpaired_surrogate(note)
        if bad is not None:
            raise ConfigError("notes", f"{source}: the note for step {key} holds {note[bad]!a} at character "
                                       f"{bad + 1:,}, half of a UTF-16 pair, not text; remove it")
        if len(note) > MAX_NOTE:
            raise ConfigError("notes", f"{source}: the note for step {key} is {len(note):,} characters; "
                                       f"at most {MAX_NOTE:,} fit beside a step")
        if note.strip():
            notes[str(int(key))] = note.strip()
    return notes
