"""The CLI's --device and --dtype: a bad or unusable choice is one line; bfloat16 is recorded in the trace."""
from __future__ import annotations

import json

import pytest
import torch

from cli_helpers import assert_one_error_line, cli_in_process


@pytest.mark.parametrize("args, words", [
    (["--device", "tpu"], ["device", "tpu", "auto, cpu, cuda, mps"]),
    (["--dtype", "float8"], ["dtype", "float8", "bfloat16"]),
])
def test_an_unknown_device_or_dtype_is_one_line(capsys, monkeypatch, tiny_llama_folder, args, words):
    _, folder = tiny_llama_folder
    assert_one_error_line(cli_in_process(capsys, monkeypatch, "--prompt", "Hi", *args, model=folder), *words)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_asking_for_a_gpu_that_is_not_there_is_one_line(capsys, monkeypatch, tiny_llama_folder):
    _, folder = tiny_llama_folder
    result = cli_in_process(capsys, monkeypatch, "--prompt", "Hi", "--device", "cuda", model=folder)
    assert_one_error_line(result, "device", "cuda", "--device cpu")


def test_bfloat16_on_the_cpu_decodes_and_the_trace_says_so(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    lm, folder = tiny_llama_folder
    runs = {}
    for dtype in ("float32", "bfloat16"):
        path = tmp_path / f"{dtype}.json"
        result = cli_in_process(capsys, monkeypatch, "--prompt", "The capital", "--max-new-tokens", "3",
                                "--device", "cpu", "--dtype", dtype, "--json", str(path), model=folder)
        assert result.returncode == 0, result.stderr
        runs[dtype] = json.loads(path.read_text())["model_facts"]
    assert runs["bfloat16"]["dtype"] == "bfloat16" and runs["bfloat16"]["device"] == "cpu"
    # by hand for the tiny Llama: 2 (K and V) x 2 layers x 2 KV heads x head dim 8 x bytes per value
    assert runs["float32"]["kv_bytes_per_token"] == 2 * 2 * 2 * 8 * 4
    assert runs["bfloat16"]["kv_bytes_per_token"] == 2 * 2 * 2 * 8 * 2


def test_a_long_prompt_is_counted_on_stderr_as_it_is_read(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    """A prompt of several parts: one line a part on stderr, the tokens read of the prompt's own length; a prompt
    of one part: no line."""
    from engine.decoding import prefill

    lm, folder = tiny_llama_folder
    monkeypatch.setattr(prefill, "PREFILL_TOKENS", 16)
    text = "the cat sat on the mat " * 3
    length = len(lm.tokenizer(text)["input_ids"])
    (tmp_path / "prompt.txt").write_text(text, encoding="utf-8")
    result = cli_in_process(capsys, monkeypatch, "--prompt-file", str(tmp_path / "prompt.txt"),
                            "--max-new-tokens", "2", model=folder)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "reading the prompt" in line]
    assert [line.split(": ")[1] for line in lines] == [f"{n:,} of {length:,} tokens"
                                                      for n in [*range(16, length, 16), length]]
    result = cli_in_process(capsys, monkeypatch, "--prompt", "the cat", "--max-new-tokens", "2", model=folder)
    assert result.returncode == 0 and "reading the prompt" not in result.stderr
