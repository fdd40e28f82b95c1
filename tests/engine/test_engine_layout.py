"""The engine package's shape, read from its source (no module is imported).

Two rules:
1. No import cycle between engine modules. Every import counts, the ones written inside functions too:
   deferring an import to a function hides a cycle from Python, not from the reader.
2. No engine module has the name of something engine/__init__ exports. If `engine.decode` were both the
   module engine/decode.py and the function `decode` re-exported from the package, the attribute would be
   whichever was bound last, and `import engine.decode` anywhere would silently replace the function.
   A module may still define a function of its own name (engine/explain/findings.py's `explain`,
   engine/served/decode.py's `served_decode`) as long as the package does not re-export it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from tiny_models import ROOT

ENGINE = ROOT / "engine"
PACKAGE = "engine"


def module_name(path: Path, root: Path = ENGINE) -> str:
    """engine/served/decode.py -> engine.served.decode; a package's __init__.py is the package."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join((PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def engine_imports(path: Path, modules: set[str], root: Path = ENGINE) -> set[str]:
    """The engine modules (of `modules`) this file imports, at any depth; `from engine import x` counts as the
    package itself unless x is a module. A relative import is read from the file's own package."""
    here = module_name(path, root)
    package = (here if path.stem == "__init__" else here.rpartition(".")[0]).split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level > len(package):          # above engine/: outside the package
                continue
            parts = package[:len(package) - node.level + 1] if node.level else []
            base = ".".join([*parts, *([node.module] if node.module else [])])
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                         for alias in node.names)
    return found & modules


def import_graph(folder: Path = ENGINE) -> nx.DiGraph:
    files = list(folder.rglob("*.py"))
    modules = {module_name(p, folder) for p in files}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for path in files:
        graph.add_edges_from((module_name(path, folder), target) for target in engine_imports(path, modules, folder))
    return graph


def package_exports(folder: Path = ENGINE) -> set[str]:
    """Names engine/__init__ binds: what it imports, what __all__ lists, and what it loads on first use (the
    names of its `_HOMES` table, module -> names)."""
    names = set()
    for node in ast.parse((folder / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            if not isinstance(node.value, ast.Call):       # __all__ = list(...) is built from the table below
                names.update(ast.literal_eval(node.value))
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_HOMES" for t in node.targets):
            for group in ast.literal_eval(node.value).values():
                names.update(group)
    return names


def shadowed(folder: Path = ENGINE) -> set[str]:
    """Engine modules and subpackages named like something the package exports."""
    names = {p.stem for p in folder.glob("*.py")} | {p.parent.name for p in folder.glob("*/__init__.py")}
    return names & package_exports(folder)


def fake_engine(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / PACKAGE
    folder.mkdir()
    for name, text in {"__init__": "", **files}.items():
        (folder / f"{name}.py").write_text(text, encoding="utf-8")
    return folder


def test_the_graph_reads_every_kind_of_engine_import(tmp_path):
    folder = fake_engine(tmp_path, {"b": "", "c": "", "d": "", "a": "from .b import x\n"
                                                                       "import os\n"
                                                                       "def f():\n"
                                                                       "    from . import c\n"
                                                                       "    import engine.d\n"
                                                                       "    from engine import thing\n"
                                                                       "    from .. import elsewhere\n"})
    assert set(import_graph(folder).edges) == {("engine.a", t) for t in ("engine.b", "engine.c", "engine.d", "engine")}


def test_a_cycle_through_a_deferred_import_is_found(tmp_path):
    folder = fake_engine(tmp_path, {"search": "from .loop import Loop\n",
                                    "loop": "def make():\n    from .search import Search\n"})
    assert sorted(nx.find_cycle(import_graph(folder))) == [("engine.loop", "engine.search"),
                                                           ("engine.search", "engine.loop")]


def test_a_module_named_like_an_export_is_found(tmp_path):
    folder = fake_engine(tmp_path, {"__init__": "from .strategies import decode\n__all__ = ['decode']\n",
                                    "strategies": "", "decode": "", "explain": "def explain(): ...\n"})
    assert shadowed(folder) == {"decode"}


def test_engine_has_no_import_cycle():
    graph = import_graph()
    assert {"engine.strategies", "engine.decoding.beam", "engine.decoding.runner"} <= set(graph)
    assert ("engine.strategies", "engine.decoding.beam") in graph.edges
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycles in engine/: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles)


def test_no_engine_module_is_named_like_a_package_export():
    assert {"decode", "make_runner", "load_model", "Trace"} <= package_exports()
    assert not shadowed(), f"engine modules named like a package export: {sorted(shadowed())}"


def test_imports_inside_a_subpackage_are_read_from_its_own_package(tmp_path):
    folder = fake_engine(tmp_path, {"config": ""})
    (folder / "served").mkdir()
    (folder / "served" / "__init__.py").write_text("from .client import Server\n", encoding="utf-8")
    (folder / "served" / "client.py").write_text("from ..config import x\n", encoding="utf-8")
    (folder / "served" / "decode.py").write_text("from .client import Server\nfrom .. import config\n"
                                                 "from ... import outside\n", encoding="utf-8")
    assert set(import_graph(folder).edges) == {("engine.served", "engine.served.client"),
                                               ("engine.served.client", "engine.config"),
                                               ("engine.served.decode", "engine.served.client"),
                                               ("engine.served.decode", "engine.config")}


def test_the_engine_is_laid_out_by_family():
    """Each family of modules lives in its own subpackage, not as a name prefix in one flat folder; the top of
    engine/ keeps only what every family shares (at most 10 modules)."""
    for family, module in (("served", "client"), ("trace", "check"), ("model", "cache"), ("samplers", "llama"),
                           ("grammar", "constrain"), ("decoding", "beam"), ("inside", "lens"), ("cli", "main"),
                           ("explain", "escape")):
        assert (ENGINE / family / f"{module}.py").is_file(), f"engine/{family}/{module}.py"
    flat = {p.stem for p in ENGINE.glob("*.py")}
    assert len(flat) <= 10, sorted(flat)
    assert not {name for name in flat if name.startswith(("served", "trace", "model", "sampler", "grammar", "kv"))}
    # state and arithmetic without Streamlit or Plotly live in the engine, not in ui/ or figures/
    assert (ENGINE / "decoding" / "stepper.py").is_file() and (ENGINE / "decoding" / "rerank.py").is_file()
    assert not [p for p in (ROOT / "ui").glob("*.py") if p.stem in ("stepper", "budget")]
    assert not (ROOT / "figures" / "beam_rerank.py").exists()


def test_each_family_says_what_it_does_and_lists_its_modules():
    """A family's __init__ docstring names every module in it, so a newcomer reads the family from one place."""
    for init in ENGINE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc.split()) >= 8, f"{init.parent.name}: no docstring saying what the family does"
        modules = {p.name for p in init.parent.glob("*.py")} - {"__init__.py"}
        missing = {m for m in modules if m not in doc}
        assert not missing, f"engine/{init.parent.name}/__init__.py does not name {sorted(missing)}"


def project_graph() -> nx.DiGraph:
    """Every module of engine/, ui/, figures/ and pages/ and the project modules each imports (absolute imports;
    relative ones inside engine/ are read from their package)."""
    folders = ("engine", "ui", "figures", "pages")
    files = [p for f in folders for p in (ROOT / f).rglob("*.py")]
    names = {p: ".".join(p.relative_to(ROOT).with_suffix("").parts) for p in files}
    names = {p: n[: -len(".__init__")] if n.endswith(".__init__") else n for p, n in names.items()}
    modules = set(names.values())
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for path, here in names.items():
        package = (here if path.stem == "__init__" else here.rpartition(".")[0]).split(".")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = package[:len(package) - node.level + 1] if node.level else []
                base = ".".join([*parts, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            graph.add_edges_from((here, t) for t in targets if t in modules and t != here)
    return graph


def test_no_import_cycle_in_the_project_and_no_arrow_from_the_engine_up():
    graph = project_graph()
    assert {"engine.strategies", "ui.settings", "ui.i18n", "figures.beam_tree", "pages.answers"} <= set(graph)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:5])
    up = [(a, b) for a, b in graph.edges if a.startswith("engine") and b.split(".")[0] in ("ui", "figures", "pages")]
    assert not up, f"the engine imports the app: {up}"
