"""Every bench script imports the way `make bench` and `make gpu-check` start it: `python -m bench.<name>` from
the project root, with no test path on sys.path.

pytest puts tests/ and its folders on sys.path, so an import like `from tiny_models import ...` works inside
pytest and fails for the real command. The check therefore runs in a fresh interpreter: it imports each bench
module (nothing runs: each one starts under `if __name__ == "__main__"`) and resolves every import written
inside a function, which only runs later.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__")

CHECK = """
import importlib, importlib.util, sys
failed = []
for name in sys.argv[1].split(","):
    try:
        if name.startswith("bench."):
            importlib.import_module(name)
        elif importlib.util.find_spec(name) is None:
            failed.append(f"{name}: not found")
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def nested_imports(path: Path) -> set[str]:
    """Modules imported inside functions of this file (top-level imports are checked by importing the file)."""
    found = set()
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    found.add(node.module)
    return found


def test_the_bench_folder_is_read():
    assert {"bench_gpu", "bench_engine", "hostile_run"} <= set(BENCH)


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_every_bench_module_imports_from_the_project_root():
    modules = [f"bench.{name}" for name in BENCH]
    modules += sorted(set().union(*(nested_imports(ROOT / "bench" / f"{name}.py") for name in BENCH)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", CHECK, ",".join(modules)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_nested_imports_are_found(tmp_path):
    """The AST walk sees imports written inside functions, and leaves top-level and relative ones to the import."""
    source = tmp_path / "script.py"
    source.write_text("import json\n"
                      "def main():\n"
                      "    from trace_builders import loop_trace\n"
                      "    def inner():\n"
                      "        import tiny_models, os.path\n"
                      "    from . import sibling\n", encoding="utf-8")
    assert nested_imports(source) == {"trace_builders", "tiny_models", "os.path"}
