"""Every command the README and docs/ show runs: each `python -m engine ...` line is parsed by the real parser
(and a decode's settings checked as the CLI checks them, without a model), each `make ...` line is a target
`make -n` accepts. The README stays short and links every page under docs/."""
from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from tiny_models import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"```(?:bash|sh|console)?\n(.*?)```", re.S)
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")

pytestmark = pytest.mark.cli


def shell_lines(text: str) -> list[str]:
    """The commands of a doc's fenced blocks: continuations joined, comments and prompts dropped."""
    lines = []
    for block in FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def commands(prefix: str) -> list[tuple[str, list[str]]]:
    """(doc, argv after the prefix) for every shown line that runs `prefix` (env assignments skipped)."""
    found = []
    for doc in DOCS:
        for line in shell_lines(doc.read_text(encoding="utf-8")):
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            while words and ENV.match(words[0]):
                words = words[1:]
            runs_engine = len(words) >= 3 and words[0].endswith("python") and words[1:3] == ["-m", "engine"]
            if prefix == "engine" and runs_engine:
                found.append((doc.name, words[3:]))
            elif prefix == "make" and words and words[0] == "make":
                found.append((doc.name, words[1:]))
    return found


def test_the_docs_show_commands_of_both_kinds():
    assert len(commands("engine")) >= 8 and len(commands("make")) >= 4


@pytest.mark.parametrize("doc,argv", commands("engine"), ids=lambda v: v if isinstance(v, str) else " ".join(v)[:60])
def test_each_engine_command_shown_parses(doc, argv):
    from engine.cli.main import _checked_config, build_parser

    from engine.errors import ConfigError

    args = build_parser().parse_args(argv)          # an unknown flag or a bad value exits here
    if args.command == "decode":
        try:
            _checked_config(args)                  # the settings a decode checks before loading a model
        except ConfigError as exc:                 # a file the reader brings (city.json) is theirs, not the doc's
            assert "No such file" in str(exc), f"{doc}: {exc}"


@pytest.mark.parametrize("doc,argv", commands("make"), ids=lambda v: v if isinstance(v, str) else " ".join(v)[:60])
def test_each_make_command_shown_is_a_target(doc, argv):
    done = subprocess.run(["make", "-n", "-C", str(ROOT), *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{doc}: make {' '.join(argv)}: {done.stderr.strip()[-300:]}"


def test_the_readme_is_short_and_links_every_doc():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for page in (ROOT / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, f"README does not link docs/{page.name}"
    assert "make run" in readme and "make test" in readme
