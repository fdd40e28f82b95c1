"""The lesson file (engine.lesson) and `python -m engine lesson`: the trace's numbers and texts in the page's data,
hostile text that stays text, a refused trace refused with the reader's own line, and one-line errors."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

import hostile_traces
from cli_helpers import run_cli
from engine import DecodeConfig, Trace, TraceFormatError, decode
from engine.cli.main import main
from engine.lesson import lesson_html, parse_notes
from engine.lesson.view import tree_rows
from engine.errors import ConfigError
from tiny_models import ROOT
from trace_builders import NODES, beam_trace, candidate, figure_step, make_trace

HOSTILE = "</script><img src=x onerror=alert(1)>"
POLICY = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:"
DATA = re.compile(r'<script type="application/json" id="lesson-data">(.*?)</script>', re.S)


def hostile_trace() -> Trace:
    """Two steps whose texts (prompt, model, candidates, chosen) carry markup that would close the data's tag."""
    steps = [figure_step(0, [candidate(7, HOSTILE, 0.5, 1, 0.625), candidate(9, "<!--", 0.3, 2, 0.375),
                             candidate(4, "\n", 0.2, 3, 0.0, kept=False)], chosen=7, text=HOSTILE),
             figure_step(1, [candidate(8, " the", 0.75, 1, 1.0), candidate(5, "the", 0.25, 2, 0.0, kept=False)],
                         chosen=8, text=" the")]
    trace = make_trace(steps)
    return Trace.from_dict({**trace.to_dict(), "prompt": HOSTILE + " & <b>", "model": HOSTILE})


def start_tags(page: str) -> list:
    """The start tags an HTML parser reads in the page (a script's text is read as text, up to '</script')."""
    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append(tag)

    Tags().feed(page)
    return found


def data_of(html: str) -> dict:
    found = DATA.findall(html)
    assert len(found) == 1
    return json.loads(found[0])


def test_the_page_data_holds_the_trace_texts_and_numbers_with_no_markup_left():
    html = lesson_html(hostile_trace(), notes={"2": HOSTILE})
    raw = DATA.findall(html)[0]
    assert "</" not in raw and "<!--" not in raw                  # nothing in it can end the tag or open a comment
    tags = start_tags(html)
    assert tags.count("script") == 3 and "img" not in tags                # data, plotly.js, the lesson's script
    view = data_of(html)["view"]
    assert view["prompt"] == HOSTILE + " & <b>" and view["model"] == HOSTILE
    first, second = view["steps"]
    # the numbers written in hostile_trace, by raw rank
    assert first["texts"] == [HOSTILE, "<!--", "\n"] and first["ids"] == [7, 9, 4]
    assert first["p"] == [0.5, 0.3, 0.2] and first["q"] == [0.625, 0.375, 0.0] and first["kept"] == [1, 1, 0]
    assert "rank" not in first                                    # ranks 1, 2, 3 go unsaid
    assert first["chosen"] == 7 and first["chosen_text"] == HOSTILE
    assert second["texts"] == [" the", "the"] and second["p"] == [0.75, 0.25]
    assert data_of(html)["notes"] == {"2": HOSTILE}


def test_the_page_asks_for_nothing_and_uses_classic_scripts_only():
    html = lesson_html(hostile_trace())
    assert f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">' in html
    assert 'type="module"' not in html and "fetch(" not in html.split("/*PLOTLY*/")[-1]
    assert re.search(r"<(link|iframe|object|embed)\b", html) is None
    assert "plotly.js" in html[:200_000] and data_of(html)["bundle"]["build"] in ("cartesian", "full")


def test_languages_come_from_the_texts_and_the_page_opens_in_the_one_asked_for():
    data = data_of(lesson_html(hostile_trace(), lang="zh"))
    assert data["lang"] == "zh"
    for lang in ("en", "zh"):
        written = json.loads((ROOT / "assets" / "texts" / lang / "lesson.json").read_text(encoding="utf-8"))
        assert data["texts"][lang] == written
    assert data["texts"]["zh"]["next"] != data["texts"]["en"]["next"]
    with pytest.raises(ValueError):
        lesson_html(hostile_trace(), lang="fr")


def test_a_beam_tree_keeps_the_app_layout_and_the_best_path():
    # column by column, under the parent's row, best rank first, centred on 0 (worked out on paper from NODES)
    rows = tree_rows(NODES)
    assert [rows[i] for i in (1, 2, 3, 4)] == [-1.5, -0.5, 0.5, 1.5]
    assert [rows[i] for i in (5, 7, 6, 8)] == [-1.5, -0.5, 0.5, 1.5]      # under A: x (rank 1), y (3); under B
    assert [rows[i] for i in (9, 10, 11, 12)] == [-1.5, -0.5, 0.5, 1.5]
    view = data_of(lesson_html(beam_trace()))["view"]
    assert view["kind"] == "beam" and view["tree"]["best"] == [1, 5, 9]
    assert [n[4] for n in view["tree"]["nodes"]] == [n.status for n in NODES]


def test_notes_are_checked_whole():
    assert parse_notes('{"1": " first ", "3": "", "2": "second"}', steps=3) == {"1": "first", "2": "second"}
    for text, words in (('{"4": "x"}', "'4' is not a step of this run (1..3)"), ('{"0": "x"}', "'0' is not a step"),
                        ('{"one": "x"}', "'one' is not a step"), ('["x"]', "must be a JSON object"),
                        ('{"1": 5}', "must be text, not int"), ('{"1": "' + "x" * 2001 + '"}', "2,001 characters"),
                        ("{", "is not valid JSON")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            parse_notes(text, steps=3)


# ---- the command line ----------------------------------------------------------------------------------------------
@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(hostile_trace().to_json(), encoding="utf-8")
    return path


def test_the_cli_writes_the_lesson_with_the_title_and_notes(capsys, monkeypatch, tmp_path, trace_file):
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"1": "look at the cut token"}), encoding="utf-8")
    out = tmp_path / "lesson.html"
    code, stdout, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace_file), "--out", str(out),
                                                               "--lang", "zh", "--title", "第一课",
                                                               "--notes", str(notes)])
    assert code == 0 and stdout == "" and stderr.startswith(f"lesson written to {out}")
    data = data_of(out.read_text(encoding="utf-8"))
    assert data["lang"] == "zh" and data["title"] == "第一课" and data["notes"] == {"1": "look at the cut token"}
    assert data["view"]["steps"][0]["texts"][0] == HOSTILE


@pytest.fixture(scope="module")
def real(llama):
    greedy = decode(llama, "The capital of France is", DecodeConfig(strategy="greedy", max_new_tokens=6))
    beam = decode(llama, "The capital of France is", DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=4))
    return greedy, beam


def test_a_trace_the_app_refuses_is_refused_with_the_same_line(capsys, monkeypatch, tmp_path, real):
    cases = hostile_traces.refused(*real)
    for case in cases[::6]:
        path = tmp_path / f"{case.name}.json"
        path.write_bytes(case.payload)
        with pytest.raises(TraceFormatError) as refused:
            Trace.from_json(case.payload)
        code, stdout, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(path), "--out",
                                                                   str(tmp_path / "x.html")])
        assert (code, stdout, stderr) == (2, "", f"error: {refused.value}\n"), case.name
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize("args, words", [
    (["--lang", "fr"], "argument --lang: invalid choice: 'fr'"),
    (["--title", "a\nb"], "--title: is more than one line"),
    (["--title", "x" * 201], "--title: is 201 characters"),
    (["--out", "/no/such/folder/x.html"], "--out: cannot write /no/such/folder/x.html: the folder"),
    (["--out", "-"], "--out: give a file name"),
    (["--notes", "/no/such/notes.json"], "--notes: cannot read /no/such/notes.json"),
])
def test_bad_flags_get_one_error_line(capsys, monkeypatch, tmp_path, trace_file, args, words):
    argv = ["lesson", str(trace_file), "--out", str(tmp_path / "x.html"), *args]
    code, stdout, stderr = run_cli(capsys, monkeypatch, main, argv)
    assert code == 2 and stdout == "" and stderr.startswith(f"error: {words}") and stderr.count("\n") == 1


def test_a_missing_trace_and_a_note_for_a_step_the_run_lacks(capsys, monkeypatch, tmp_path, trace_file):
    code, _, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(tmp_path / "none.json"), "--out",
                                                          str(tmp_path / "x.html")])
    assert code == 2 and stderr == f"error: TRACE: cannot read {tmp_path / 'none.json'}: No such file or directory\n"
    notes = tmp_path / "notes.json"
    notes.write_text('{"3": "the run has two steps"}', encoding="utf-8")
    code, _, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace_file), "--out", str(tmp_path / "x.html"),
                                                          "--notes", str(notes)])
    assert code == 2 and stderr == "error: --notes: '3' is not a step of this run (1..2)\n"


@pytest.mark.process
def test_a_bad_flag_answers_before_pytorch_is_imported(tmp_path):
    code = ("import sys; from engine.__main__ import main\n"
            "try:\n    main(['lesson', 'x.json', '--out', 'y.html', '--lang', 'fr'])\n"
            "except SystemExit as e:\n    print(e.code, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False"] and done.stderr.startswith("error: argument --lang")


def test_every_stage_of_every_chain_has_its_name_in_the_lessons_languages():
    """The lesson page names a step's stages by `stage_<name>` (lesson.js); a stage without a text would show
    its key."""
    from engine.config import STAGE_NAMES

    for lang in ("en", "zh"):
        texts = json.loads((ROOT / "assets" / "texts" / lang / "lesson.json").read_text(encoding="utf-8"))
        assert {f"stage_{name}" for name in STAGE_NAMES} <= set(texts), lang


# ---- hostile arguments and files --------------------------------------------------------------------------------
@pytest.mark.parametrize("title, words", [
    ("caf\udce9", "--title: is not UTF-8 text (byte 0xE9 at character 4)"),     # a Latin-1 byte in argv
    ("half \ud83d", "--title: character 6 is '\\ud83d', half of a UTF-16 pair"),
])
def test_a_title_that_is_not_text_is_one_line(capsys, monkeypatch, tmp_path, trace_file, title, words):
    out = tmp_path / "x.html"
    code, stdout, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace_file), "--out", str(out),
                                                               "--title", title])
    assert (code, stdout) == (2, "") and stderr.startswith(f"error: {words}") and stderr.count("\n") == 1, stderr
    assert not out.exists()


def test_a_note_with_a_lone_surrogate_is_one_line(capsys, monkeypatch, tmp_path, trace_file):
    notes = tmp_path / "notes.json"
    notes.write_text('{"2": "look \\ud800 here"}', encoding="utf-8")        # JSON may escape half a pair
    out = tmp_path / "x.html"
    code, stdout, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace_file), "--out", str(out),
                                                               "--notes", str(notes)])
    assert (code, stdout) == (2, "")
    assert stderr == "error: --notes: the note for step 2 holds '\\ud800' at character 6, half of a UTF-16 pair, " \
                     "not text; remove it\n"
    assert not out.exists()


def test_out_naming_the_trace_itself_is_refused_and_the_trace_kept(capsys, monkeypatch, tmp_path, trace_file):
    before = trace_file.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(trace_file)
    for trace, out in ((trace_file, trace_file), (link, trace_file), (trace_file, link)):
        code, stdout, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace), "--out", str(out)])
        assert (code, stdout) == (2, "") and stderr.startswith(f"error: --out: {out} is the file given as TRACE")
        assert stderr.count("\n") == 1
    notes = tmp_path / "notes.json"
    notes.write_text("{}", encoding="utf-8")
    code, _, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace_file), "--out", str(notes),
                                                          "--notes", str(notes)])
    assert code == 2 and "is the file given as --notes" in stderr
    assert trace_file.read_bytes() == before and notes.read_text() == "{}"


def test_out_that_cannot_take_the_lesson_is_named_as_out(capsys, monkeypatch, tmp_path, trace_file):
    import os

    import engine.cli.output

    code, _, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace_file), "--out", "/dev/full"])
    assert code == 2 and stderr == "error: --out: cannot write /dev/full: No space left on device\n"
    fifo = tmp_path / "lesson.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(engine.cli.output, "PIPE_WAIT_S", 0.2)
    code, _, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(trace_file), "--out", str(fifo)])
    assert code == 2 and stderr.startswith(f"error: --out: {fifo} is a named pipe") and stderr.count("\n") == 1


def test_a_trace_past_the_size_a_lesson_reads_says_what_would_fit(capsys, monkeypatch, tmp_path, real):
    """The CLI records up to 1,024 steps of 200 candidates: 39.3 MB on the tiny Llama, past the 20 MB the app and
    the lesson read. The line names the file's size and the settings at 90 % of the share that fits: 20 MB /
    39,259,653 bytes x 0.9 = 0.4585, so 1,024 x 0.4585 = 469 steps or 200 x 0.4585 = 91 candidates."""
    greedy, _ = real
    data = greedy.to_dict()
    data["config"] = {**data["config"], "max_new_tokens": 1024, "top_n": 200}
    text = json.dumps(data).encode()
    path = tmp_path / "big.json"
    path.write_bytes(text + b" " * (39_259_653 - len(text)))
    out = tmp_path / "x.html"
    code, stdout, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(path), "--out", str(out)])
    assert (code, stdout) == (2, "") and stderr.count("\n") == 1 and not out.exists()
    assert stderr.startswith(f"error: TRACE: {path} is 39.3 MB; a lesson is made from a trace of at most 20 MB")
    assert "about 46% as much" in stderr and "--max-new-tokens 469 or --top-n 91 would fit" in stderr
    # a beam search is cut by its steps or its beams
    data["config"] = {**data["config"], "strategy": "beam", "num_beams": 32, "top_n": 20}
    text = json.dumps(data).encode()
    path.write_bytes(text + b" " * (20_181_972 - len(text)))
    code, _, stderr = run_cli(capsys, monkeypatch, main, ["lesson", str(path), "--out", str(out)])
    assert code == 2 and "--max-new-tokens 913 or fewer than 32 beams would fit" in stderr
