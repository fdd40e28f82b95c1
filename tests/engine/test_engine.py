"""Engine pieces: trace JSON, token display, model loading and its cache, the CLI, no Streamlit."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_helpers import run_cli
from tiny_models import ROOT
from engine.cli.main import main
from engine import DecodeConfig, ModelLoadError, Trace, TraceFormatError, decode, load_model
from engine.model import bytes_display, bundled_cache_dir


def test_trace_json_round_trip_is_lossless(tiny):
    for strategy in ("greedy", "beam", "soft"):
        trace = decode(tiny, "The capital of France is", DecodeConfig(strategy=strategy, max_new_tokens=5, num_beams=3))
        text = trace.to_json()
        data = json.loads(text)
        for key in ("schema", "model", "prompt", "prompt_token_ids", "config", "steps", "nodes", "sequences"):
            assert key in data
        assert data["schema"] == "decodescope.trace/1"
        assert set(data["sequences"][0]) >= {"token_ids", "text", "cum_logprob", "score"}
        again = Trace.from_json(text)
        assert again == trace
        assert again.to_json() == text


@pytest.mark.parametrize("payload,words", [
    ("not json at all", "not valid JSON"),
    ("[1, 2, 3]", "JSON object"),
    ('{"schema": "something/1"}', "not a DecodeScope trace"),
    ('{"schema": "decodescope.trace/9"}', "newer"),
    ('{"schema": "decodescope.trace/1", "model": "m"}', "wrong shape"),
])
def test_from_json_rejects_bad_input_with_a_clear_message(payload, words):
    with pytest.raises(TraceFormatError, match=words):
        Trace.from_json(payload)


def test_from_json_rejects_oversized_input():
    with pytest.raises(TraceFormatError, match="limit|MB"):
        Trace.from_json(b" " * (21 * 1024 * 1024))


def test_byte_pieces_display_as_bytes_never_replacement_char(llama):
    assert bytes_display("你".encode()) == "你"
    assert bytes_display("你".encode()[:2]) == "<0xE4><0xBD>"
    assert bytes_display(b" \xf0\x9f") == " <0xF0><0x9F>"
    ids = llama.tokenizer("你好 😀")["input_ids"]
    texts = [llama.token_texts[i] for i in ids]
    assert all("\ufffd" not in t for t in texts)
    assert any(t.startswith("<0x") for t in texts)


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_engine_imports_no_streamlit():
    code = ("import sys, importlib, pkgutil, engine;"
            "names = [m.name for m in pkgutil.walk_packages(engine.__path__, 'engine.')];"
            "[importlib.import_module(n) for n in names];"
            "[getattr(engine, n) for n in engine.__all__];"
            "assert len(names) > 40, names;"
            "assert 'streamlit' not in sys.modules, 'engine imported streamlit'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_bad_arguments_are_answered_before_pytorch_is_imported():
    """A typo costs well under a second: the checks run before the model libraries are imported."""
    code = ("import sys; from engine.__main__ import main;"
            "cases = [['decode', '--prompt', ''], ['decode', '--prompt', 'x', '--max-new-tokens', '0'],"
            "         ['decode', '--prompt', 'x', '--strategy', 'sample', '--top-p', '2']];"
            "codes = [main(c) for c in cases];"
            "assert codes == [2, 2, 2], codes;"
            "assert not {'torch', 'transformers'} & set(sys.modules), 'a model library was imported'")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [line.split(":")[1].strip() for line in result.stderr.splitlines()] == ["prompt", "max_new_tokens",
                                                                                    "top_p"], result.stderr


@pytest.fixture(scope="module")
def saved_tiny(tmp_path_factory, ):
    from tiny_models import tiny_llama

    folder = tmp_path_factory.mktemp("tiny-model")
    lm = tiny_llama()
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder


def test_load_local_folder_gives_facts(saved_tiny, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lm = load_model(str(saved_tiny))
    f = lm.facts
    assert (f.vocab_size, f.layers, f.kv_heads, f.head_dim, f.dtype) == (300, 2, 2, 8, "float32")
    assert f.kv_bytes_per_token == 2 * 2 * 2 * 8 * 4
    assert f.has_chat_template
    assert lm.model.training is False


def test_load_errors_are_one_clear_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="not a model"):
        load_model(str(tmp_path))
    with pytest.raises(ModelLoadError, match="no network"):
        load_model("no-such-org/no-such-model")
    from transformers import BertConfig, BertModel

    bert = tmp_path / "bert"
    BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16)).save_pretrained(bert)
    with pytest.raises(ModelLoadError, match="not a causal language model"):
        load_model(str(bert))


@pytest.mark.process      # a fresh interpreter: make test, not make check
def test_cli_prints_table_and_writes_json(saved_tiny, tmp_path):
    out = tmp_path / "trace.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    run = subprocess.run([sys.executable, "-m", "engine", "decode", "--prompt", "The capital",
                          "--model", str(saved_tiny), "--strategy", "beam", "--num-beams", "3",
                          "--max-new-tokens", "4", "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "step" in run.stdout and "top 5" in run.stdout
    trace = Trace.from_json(out.read_text())
    assert trace.config.num_beams == 3 and len(trace.steps) >= 1


@pytest.mark.parametrize("args,param", [
    (["--prompt", ""], "prompt"),
    (["--prompt", "x", "--strategy", "sample", "--temperature", "0"], "temperature"),
    (["--prompt", "x", "--top-p", "0"], "top_p"),
    (["--prompt", "x", "--top-k", "-1"], "top_k"),
    (["--prompt", "x", "--strategy", "beam", "--num-beams", "33"], "num_beams"),
    (["--prompt", "x", "--max-new-tokens", "1025"], "max_new_tokens"),
    (["--prompt", "x", "--strategy", "nucleus"], "strategy"),
])
def test_cli_bad_input_exits_2_with_one_line(capsys, monkeypatch, args, param):
    """In this process (test_bad_input.py runs the same refusals as a real process): an exception that
    escaped main() would fail the test here as a traceback would there."""
    code, _, err = run_cli(capsys, monkeypatch, main, ["decode", *args])
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and param in lines[0]


@pytest.mark.bundled      # de-quantises the real bundled file
def test_half_written_cache_is_never_read(tmp_path, monkeypatch):
    """A cache folder without its COMPLETE marker (a killed write) is not taken as good."""
    monkeypatch.setenv("DECODESCOPE_CACHE", str(tmp_path))
    target = bundled_cache_dir()
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")   # what a killed write might leave
    from engine.model import loading as model_module

    class Dequantising(Exception):
        """The load went to the GGUF file: the broken folder was not read (the rebuild itself, ~20 s, is
        tested whole by test_model_cache's damaged copy)."""

    def dequantise(report, which):
        raise Dequantising(which.name)

    monkeypatch.setattr(model_module, "read_cache", lambda *a: pytest.fail("a folder without its marker was read"))
    monkeypatch.setattr(model_module, "dequantise", dequantise)
    with pytest.raises(Dequantising):
        load_model()     # de-quantises from the GGUF instead of reading the broken folder
