"""Text from a file inside the page's own sentences: a model's name that holds Unicode's direction controls stays
inside its isolate and turns no sentence around; a lesson's notes box ends a line at a newline only."""
from __future__ import annotations

import json

import pytest

from app_helpers import open_app, texts
from ui.export import lesson_notes
from ui.file_text import FSI, PDI, isolated

pytestmark = [pytest.mark.usefixtures("navigation_frame")]
# Unicode's explicit direction formatting characters (UAX #9, section 2): marks, embeddings, overrides, isolates
BIDI_CONTROLS = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}
REVERSED = "tiny-llama\u202egnp.exe"        # shows as "tiny-llamaexe.png" and turns what follows around


@pytest.mark.tiny
def test_a_name_keeps_no_direction_control_of_its_own():
    for name in (REVERSED, "a\u2069\u202eb", "\u2067x\u2066y\u200f\u061c", "x" * 500):
        shown = isolated(name)
        inner = shown[1:-1]
        assert shown[0] == FSI and shown[-1] == PDI
        assert not BIDI_CONTROLS & set(inner), repr(shown)        # a PDI inside would close the isolate early
        assert len(inner) <= 300 * 6                              # each character at most an escape: \u202e
    assert isolated(REVERSED) == FSI + "tiny-llama\\u202egnp.exe" + PDI
    assert isolated("עברית model") == FSI + "עברית model" + PDI    # right-to-left letters stay, isolated


@pytest.mark.tiny
def test_a_note_may_hold_a_line_separator():
    """U+2028 (and U+0085, a form feed) inside a typed note is part of the note, not a second line."""
    notes, problem = lesson_notes("1: first\u2028still the first note\n2: a\x0cb\u0085c\r\n3: third", steps=3)
    assert problem is None
    assert notes == {"1": "first\u2028still the first note", "2": "a\x0cb\u0085c", "3": "third"}


@pytest.mark.apptest
@pytest.mark.tiny
def test_a_saved_run_of_a_reversed_name_keeps_the_banner_in_order(tiny_loads, tmp_path):
    from engine.answers import TreeSettings
    from engine.answers.record import to_json
    from engine.answers.run import explore

    run = explore(tiny_loads, "The capital of", TreeSettings(depth=2, budget=8, branch=2), samples=2)
    data = json.loads(to_json(run))
    data["model"] = REVERSED
    at = open_app("answers", params={"wa_depth": 2, "wa_budget": 16, "wa_branch": 2, "wa_samples": 0})
    at.file_uploader(key="wa_upload").set_value(("run.json", json.dumps(data).encode(), "application/json")).run()
    assert not at.exception, at.exception
    banner = [s.value for s in at.success]
    assert len(banner) == 1 and "\u202e" not in banner[0], banner
    before, after = texts("answers")["showing_file"].split("{model}")
    # the page's sentence, then the name in its isolate, then the rest of the sentence, in that order
    assert banner[0] == before + FSI + "tiny\\-llama\\\\u202egnp\\.exe" + PDI + after
