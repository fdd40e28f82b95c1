"""Every function parameter named `lm` says it is a LoadedModel (or LoadedModel | None), across the project's code.

Read from the source with ast, so a new untyped `lm` anywhere in engine/, ui/, figures/, pages/, bench/ or app.py
fails here rather than in a reader's head.
"""
from __future__ import annotations

import ast

from tiny_models import ROOT

FOLDERS = ["engine", "ui", "figures", "pages", "bench"]
ALLOWED = {"LoadedModel", "LoadedModel | None", "'LoadedModel'", "'LoadedModel | None'"}


def untyped_lm(source: str) -> list[str]:
    """'function:line' for each parameter named lm whose annotation is not LoadedModel."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):     # a lambda cannot annotate
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs:
                shown = None if arg.annotation is None else ast.unparse(arg.annotation)
                if arg.arg == "lm" and shown not in ALLOWED:
                    found.append(f"{node.name}:{node.lineno}")
    return found


def test_the_check_sees_an_untyped_lm():
    source = ("def a(lm): ...\n"
              "def b(x, lm=None): ...\n"
              "def c(lm: LoadedModel, *, other): ...\n"
              "def d(trace, lm: LoadedModel | None = None): ...\n"
              "def e(lm: object): ...\n")
    assert untyped_lm(source) == ["a:1", "b:2", "e:5"]


def test_every_lm_parameter_is_a_loaded_model():
    files = [ROOT / "app.py"] + [p for folder in FOLDERS for p in sorted((ROOT / folder).glob("*.py"))]
    assert len(files) > 40
    found = [f"{path.relative_to(ROOT)} {where}" for path in files
             for where in untyped_lm(path.read_text(encoding="utf-8"))]
    assert not found, "lm without a LoadedModel annotation: " + ", ".join(found)
