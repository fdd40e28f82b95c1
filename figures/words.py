"""A figure's English words, read from `assets/texts/en`: the one place they are written.

Pages pass the reader's language (`texts=`); a figure drawn without them (a notebook, the CLI's
exports, a test) uses these, so the two can never drift apart."""
from __future__ import annotations

import functools
import json
from pathlib import Path

TEXTS = Path(__file__).resolve().parents[1] / "assets" / "texts" / "en"


@functools.cache
def _section(name: str) -> dict:
    return json.loads((TEXTS / f"{name}.json").read_text(encoding="utf-8"))


def english(section: str, prefix: str, keys) -> dict:
    """{key: the English text of `section.prefix+key`} for each key (a missing text raises KeyError)."""
    texts = _section(section)
    return {key: texts[prefix + key] for key in keys}
