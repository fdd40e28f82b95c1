"""`decode --stages` and `lens` on the command line, checked against transformers run in the test."""
from __future__ import annotations

import re

import pytest
import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from cli_helpers import run_cli
from engine.cli.main import main


def cli(capsys, monkeypatch, *argv):
    return run_cli(capsys, monkeypatch, main, argv)


def test_decode_stages_prints_each_stage_kept_count_and_top1(capsys, monkeypatch, tiny_llama_folder):
    lm, folder = tiny_llama_folder
    code, out, err = cli(capsys, monkeypatch, "decode", "--model", folder, "--prompt", "The capital of France is",
                         "--strategy", "sample", "--temperature", "0.7", "--top-k", "12", "--top-p", "0.8",
                         "--max-new-tokens", "2", "--stages")
    assert code == 0, err
    rows = re.findall(r"^\s+(raw|temperature 0\.7|top-k 12|top-p 0\.8)\s+kept\s+(\d+)\s+.*?([0-9.]+)$", out, re.M)
    first = rows[:4]
    assert [r[0] for r in first] == ["raw", "temperature 0.7", "top-k 12", "top-p 0.8"]
    ids = lm.tokenizer("The capital of France is")["input_ids"]
    with torch.no_grad():
        scores = lm.model(input_ids=torch.tensor([ids])).logits[:, -1].float()
    expected = [(scores.shape[-1], float(torch.softmax(scores, -1).max()))]
    for processor in (TemperatureLogitsWarper(0.7), TopKLogitsWarper(12), TopPLogitsWarper(0.8)):
        scores = processor(torch.tensor([ids]), scores.clone())
        expected.append((int((~torch.isneginf(scores)).sum()), float(torch.softmax(scores, -1).max())))
    assert [int(r[1]) for r in first] == [n for n, _ in expected]
    assert [float(r[2]) for r in first] == pytest.approx([p for _, p in expected], abs=1e-4)
    assert expected[2][0] == 12          # top-k kept exactly k


def test_lens_prints_the_top_token_of_every_layer(capsys, monkeypatch, tiny_llama_folder):
    lm, folder = tiny_llama_folder
    code, out, err = cli(capsys, monkeypatch, "lens", "--model", folder, "--prompt", "The capital of France is",
                         "--top", "1")
    assert code == 0, err
    rows = re.findall(r"^\s*(emb|\d+)[ *] (.+) ([0-9.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["emb"] + [str(i) for i in range(1, lm.facts.layers + 1)]
    ids = lm.tokenizer("The capital of France is")["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(lm.model(input_ids=torch.tensor([ids])).logits[0, -1], -1)
    assert (rows[-1][1] == repr(lm.token_texts[int(probs.argmax())])
            or rows[-1][1] == lm.token_texts[int(probs.argmax())])
    assert float(rows[-1][2]) == pytest.approx(float(probs.max()), abs=1e-3)


@pytest.mark.parametrize("argv,words", [(["lens", "--prompt", " "], "prompt"),
                                        (["lens", "--prompt", "Paris", "--top", "0"], "--top")])
def test_lens_bad_input_is_one_line(capsys, monkeypatch, tiny_llama_folder, argv, words):
    code, out, err = cli(capsys, monkeypatch, *argv, "--model", tiny_llama_folder[1])
    assert code == 2 and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1 and words in err


@pytest.mark.parametrize("extra, note", [
    (["--strategy", "beam", "--num-beams", "2", "--repetition-penalty", "1.5"],
     "(no sampler stages: beam search records none; it applies the repetition penalty 1.5 to every beam's "
     "log-probabilities, then ranks the beams by score)"),
    (["--strategy", "beam", "--num-beams", "2"],
     "(no sampler stages: beam search records none; it applies none of the processors, then ranks the beams by "
     "score)"),
    (["--strategy", "greedy"], "(no sampler stages: these settings apply none of the processors)"),
])
def test_decode_stages_says_truly_why_there_are_none(capsys, monkeypatch, tiny_llama_folder, extra, note):
    """Beam search with a repetition penalty applies it (and records no stages): the note must not say it
    applies none."""
    code, out, err = cli(capsys, monkeypatch, "decode", "--model", tiny_llama_folder[1], "--prompt", "Paris",
                         "--max-new-tokens", "2", "--stages", *extra)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == note


def test_greedy_with_a_penalty_records_its_stage(capsys, monkeypatch, tiny_llama_folder):
    code, out, err = cli(capsys, monkeypatch, "decode", "--model", tiny_llama_folder[1], "--prompt", "Paris",
                         "--max-new-tokens", "2", "--stages", "--repetition-penalty", "1.5")
    assert code == 0, err
    assert re.search(r"^\s+penalty 1\.5\s+kept", out, re.M) and "no sampler stages" not in out


def test_lens_notes_a_last_layer_that_is_not_the_models_logits(capsys, monkeypatch, tmp_path):
    """A Gemma 3 with its logits soft-capped after the final norm (cap * tanh(x / cap)): the lens reads the
    logits before the cap, so its last layer differs from the model's own logits by the cap's effect."""
    from tiny_models import tiny_gemma3

    lm = tiny_gemma3()
    lm.model.config.final_logit_softcapping = 5.0
    lm.model.save_pretrained(tmp_path)
    lm.tokenizer.save_pretrained(tmp_path)
    code, out, err = cli(capsys, monkeypatch, "lens", "--model", str(tmp_path), "--prompt", "Paris", "--top", "1")
    assert code == 0, err
    ids = torch.tensor([lm.tokenizer("Paris")["input_ids"]])
    with torch.no_grad():
        capped = lm.model(input_ids=ids).logits[0, -1].double()
    uncapped = 5.0 * torch.atanh(capped / 5.0)            # the cap undone by hand
    diff = float((uncapped - capped).abs().max())
    note = out.strip().splitlines()[-1]
    assert note.startswith("note: the last layer differs from the model's own logits by up to ")
    assert float(note.split("by up to ")[1].split(":")[0]) == pytest.approx(diff, rel=2e-3)
    assert "soft-capping" in note


def test_lens_has_no_note_when_the_last_layer_is_the_models_logits(capsys, monkeypatch, tiny_llama_folder):
    code, out, err = cli(capsys, monkeypatch, "lens", "--model", tiny_llama_folder[1], "--prompt", "Paris")
    assert code == 0, err
    assert "note:" not in out
