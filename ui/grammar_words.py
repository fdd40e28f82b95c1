"""Structured output's verdicts and grammar errors in the reader's language.

The engine names each verdict and each grammar error (a reason and its values) and keeps an English sentence for
the command line; here the page's texts say it. What a library wrote itself (json, jsonschema, the grammar
library) has no translation: it is quoted as code, literally, so that it never renders as Markdown either.
"""
from __future__ import annotations

from engine import DecodeScopeError
from figures.labels import code, for_markdown  # noqa: F401  (code: other modules read it from here)
from ui.i18n import t


def _json_problem(problem: str, message: str) -> str:
    return t("structured.json_" + problem, message=code(message))


def verdict_text(verdict: str, values: dict) -> str:
    """Markdown for engine.grammar.constrain.output_verdict's (verdict, values)."""
    shown = dict(values)
    if verdict == "not_json":
        shown["problem"] = _json_problem(values["problem"], values["message"])
    if verdict == "not_schema":
        shown.update(where=code(values["where"]) if values["where"] else t("structured.where_root"),
                     keyword=code(values["keyword"]), message=code(values["message"]))
    if verdict in ("schema_refused", "choices_unread"):      # the grammar itself refused: its reason, in words
        rest = {k: v for k, v in values.items() if k not in ("message", "reason")}
        shown = {"message": reason_text(values.get("reason", ""), rest, values["message"])}
    return t("structured.why_" + verdict, **shown)


def error_text(exc: DecodeScopeError) -> str:
    """Markdown for a grammar that cannot be used: the page's own words where the engine named the reason, else
    the engine's sentence, shown literally; any other engine error as every page says it (ui.engine_words)."""
    if getattr(exc, "param", "") != "grammar":
        from ui.engine_words import engine_text     # (both quote with figures.labels.code)

        return engine_text(exc)
    return reason_text(getattr(exc, "reason", ""), dict(getattr(exc, "values", {})), str(exc))


def reason_text(reason: str, values: dict, english: str) -> str:
    """Markdown for a grammar's reason and values (engine.grammar.constrain, engine.grammar.json_schema); the English
    sentence, shown literally, for a reason the page has no words for."""
    if not reason:
        return for_markdown(english)
    values = dict(values)
    if "detail" in values:
        values["detail"] = code(values["detail"])
    if reason == "schema_not_json":
        values["problem"] = _json_problem(values["problem"], values["message"])
    if reason == "unknown_kind":
        values.update(kind=code(values["kind"]), kinds=code(values["kinds"]))
    if reason == "schema_outside":
        values.update(keyword=code(values["keyword"]), target=code(values["target"]))
    return t("structured.error_" + reason, **values)
