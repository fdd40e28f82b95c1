"""What the engine said, in the page's language.

The engine keeps one English sentence per problem (the command line prints it) and names the problem: a reason
and the values that fill its sentence in (engine.errors). In English a page shows the engine's own sentence; in
another language it says the reason in that language's words (assets/texts/<lang>/errors.json). What a library
or a file wrote itself, and a problem the page has no words for, is quoted as code after a sentence in the
page's language: shown literally, never as Markdown, never passed off as a translation.
"""
from __future__ import annotations

from figures.labels import code, for_markdown
from ui.i18n import DEFAULT_LANGUAGE, language, t, texts

LITERAL = ("detail", "got", "char", "text")       # values quoted as code: what a library, a file or a user wrote
PAGE_SAID = "page_said"     # an error a page raised with its own Markdown already in the reader's language


def page_error(cls, markdown: str, plain: str | None = None):
    """An error of class `cls` (a DecodeScopeError) that a page raises in its own words: `markdown` is shown as
    it is; `plain` (default: `markdown`) is its text elsewhere."""
    return cls(plain if plain is not None else markdown, PAGE_SAID, markdown=markdown)


def engine_text(exc: Exception) -> str:
    """Markdown for an engine error (DecodeScopeError) in the reader's language."""
    reason = getattr(exc, "reason", "") or ""
    if reason == PAGE_SAID:
        return exc.values["markdown"]
    if language() == DEFAULT_LANGUAGE:
        return for_markdown(str(exc))
    key = f"errors.{reason}"
    if reason and key in texts(language()):
        values = {name: code(value) if name in LITERAL else for_markdown(str(value))
                  for name, value in dict(getattr(exc, "values", {}) or {}).items()}
        if "name" in values and reason in ("setting", "dry_breakers", "whole_number"):
            values["name"] = setting_label(str(exc.values["name"]))
        try:
            return t(key, **values)
        except (KeyError, IndexError, ValueError):       # a sentence that needs a value this error lacks
            pass
    return t("errors.unnamed", detail=code(str(exc)))


def detail_text(message: str) -> str:
    """Markdown for a detail inside a page's own sentence (what was wrong in a file): in English as it is, in
    another language quoted as code, since it stays in English."""
    return for_markdown(message) if language() == DEFAULT_LANGUAGE else code(message)


def setting_label(name: str) -> str:
    """A setting by its label on the page, in the reader's language; its field name as code if it has none."""
    for key in (f"samplers.{name}", f"step.{name}", f"answers.{name}", f"common.{name}"):
        text = t(key)
        if text != key:
            return for_markdown(text)
    return code(name)
