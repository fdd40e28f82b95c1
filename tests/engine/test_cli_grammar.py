"""`decode --json-schema | --regex | --choices | --lark` on the command line: per step the mask's allowed count,
Z_t and forced steps, checked against llguidance's matcher walked by hand; bad grammars get one line, status 2."""
from __future__ import annotations

import json
import re

import llguidance
import pytest

from cli_helpers import run_cli
from engine.cli.main import main
from grammar_reference import reference_greedy

PROMPT = "The capital of France is"
ROW = re.compile(r"^\s*(\d+)  (.{18}) +([0-9.]+) +([0-9,]+) +([0-9.]+) +(forced)?", re.M)


def cli(capsys, monkeypatch, *argv):
    return run_cli(capsys, monkeypatch, main, argv)


def test_choices_print_the_allowed_count_z_and_forced_steps_of_the_librarys_mask(capsys, monkeypatch,
                                                                                 tiny_llama_folder):
    lm, folder = tiny_llama_folder
    code, out, err = cli(capsys, monkeypatch, "decode", "--model", folder, "--prompt", PROMPT,
                         "--choices", "Paris,Rome,Lyon", "--max-new-tokens", "12")
    assert code == 0, err
    rows = ROW.findall(out)
    ids, masks, feasible = reference_greedy(lm, lm.tokenizer(PROMPT)["input_ids"],
                                            llguidance.grammar_from("choice", json.dumps(["Paris", "Rome", "Lyon"])),
                                            12)
    assert len(rows) == len(ids)
    assert [int(r[3].replace(",", "")) for r in rows] == [int(m.sum()) for m in masks]
    assert [float(r[4]) for r in rows] == pytest.approx(feasible, abs=1e-4)
    assert [bool(r[5]) for r in rows] == [int(m.sum()) == 1 for m in masks]
    text = lm.tokenizer.decode(ids, skip_special_tokens=True)
    assert text in ("Paris", "Rome", "Lyon") and f"{text!r}" in out
    assert "valid: one of the choices" in out


def test_a_schema_file_decodes_to_valid_json(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    _, folder = tiny_llama_folder
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}))
    code, out, err = cli(capsys, monkeypatch, "decode", "--model", folder, "--prompt", PROMPT,
                         "--json-schema", str(schema), "--max-new-tokens", "20")
    assert code == 0, err
    text = re.search(r"^\[0\] .*  '(.*)'$", out, re.M).group(1)
    assert json.loads(text) in ({"ok": True}, {"ok": False})


def test_an_unbounded_pattern_says_it_stopped_before_the_grammar_could_end(capsys, monkeypatch, tiny_llama_folder):
    _, folder = tiny_llama_folder
    code, out, err = cli(capsys, monkeypatch, "decode", "--model", folder, "--prompt", PROMPT,
                         "--regex", "[a-c]{10}", "--max-new-tokens", "2")
    assert code == 0, err
    assert "stopped at max_new_tokens before the grammar could end" in out and "NOT valid" in out


def _refused(capsys, monkeypatch, folder, *flags):
    code, out, err = cli(capsys, monkeypatch, "decode", "--model", folder, "--prompt", PROMPT, *flags)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    return err


def test_bad_grammars_get_one_line_and_status_2(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    _, folder = tiny_llama_folder
    not_json = tmp_path / "bad.json"
    not_json.write_text('{"type": "object",')
    assert "is not JSON (line 1" in _refused(capsys, monkeypatch, folder, "--json-schema", str(not_json))
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"type": "object", "description": "x" * 1_000_000}))
    assert "over 32,000 bytes" in _refused(capsys, monkeypatch, folder, "--json-schema", str(huge))
    assert "no text matches" in _refused(capsys, monkeypatch, folder, "--regex", "[a&&b]")
    assert "gave up after" in _refused(capsys, monkeypatch, folder, "--regex", "a{100000000}")
    assert "unclosed group" in _refused(capsys, monkeypatch, folder, "--regex", "(ab")
    assert "cannot read" in _refused(capsys, monkeypatch, folder, "--lark", str(tmp_path / "missing.lark"))
    assert "not allowed with" in _refused(capsys, monkeypatch, folder, "--regex", "a", "--choices", "a,b")
    assert "soft" in _refused(capsys, monkeypatch, folder, "--regex", "a", "--strategy", "soft")


def test_a_served_model_refuses_a_grammar_by_name():
    from engine import DecodeConfig
    from engine.served.client import ServedError
    from engine.served.decode import served_decode

    with pytest.raises(ServedError, match="local model only"):
        served_decode(None, "x", DecodeConfig(grammar_kind="regex", grammar="a+"))
