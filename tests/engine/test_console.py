"""The `decodescope` console script: `decode` is `python -m engine decode`, `run` starts Streamlit on app.py."""
from __future__ import annotations

import re
import sys

import pytest
import torch

from engine.cli import console
from engine.cli.main import main as engine_main
from cli_helpers import run_cli
from tiny_models import ROOT

PROMPT = "The capital of France is"


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_decode_prints_what_python_m_engine_prints(capsys, monkeypatch, tiny_llama_folder, strategy):
    lm, folder = tiny_llama_folder
    argv = ["decode", "--model", folder, "--prompt", PROMPT, "--strategy", strategy, "--max-new-tokens", "6",
            "--num-beams", "3"]
    code, out, err = run_cli(capsys, monkeypatch, console.main, argv)
    assert (code, err) == (0, "")
    assert (code, out, err) == run_cli(capsys, monkeypatch, engine_main, argv)
    # and what it prints is the model's own continuation, as transformers generates it
    ids = torch.tensor([lm.tokenizer(PROMPT).input_ids])
    beams = {"greedy": 1, "beam": 3}[strategy]
    generated = lm.model.generate(ids, max_new_tokens=6, do_sample=False, num_beams=beams,
                                  attention_mask=torch.ones_like(ids))[0, ids.shape[1]:]
    text = lm.tokenizer.decode(generated, skip_special_tokens=True)
    best = out.splitlines()[-1]
    assert best.startswith("[0] cum_logprob") and best.endswith(f"  {text!r}")


def test_decode_bad_input_is_one_line_with_status_2(capsys, monkeypatch, tiny_llama_folder):
    code, out, err = run_cli(capsys, monkeypatch, console.main,
                             ["decode", "--model", tiny_llama_folder[1], "--prompt", PROMPT, "--top-p", "5"])
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "top_p" in err.replace("-", "_") and err.count("\n") == 1


class FakeCall:
    """Stands in for subprocess.call: records the command line instead of starting Streamlit."""

    def __init__(self, returns=0, raises=None):
        self.returns, self.raises, self.calls = returns, raises, []

    def __call__(self, command, cwd=None):
        self.calls.append((command, cwd))
        if self.raises is not None:
            raise self.raises
        return self.returns


def streamlit_command(host: str, port: int, *rest: str) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", host,
            "--server.port", str(port), "--browser.gatherUsageStats", "false", *rest]


def test_run_starts_streamlit_on_the_app_on_localhost_by_default(monkeypatch):
    fake = FakeCall()
    monkeypatch.setattr(console.subprocess, "call", fake)
    assert console.main(["run"]) == 0
    assert fake.calls == [(streamlit_command("localhost", 8501), ROOT)]


def test_run_passes_host_port_and_any_other_streamlit_option(monkeypatch):
    fake = FakeCall(returns=3)
    monkeypatch.setattr(console.subprocess, "call", fake)
    assert console.main(["run", "--host", "0.0.0.0", "--port", "8600", "--theme.base", "dark"]) == 3
    assert fake.calls == [(streamlit_command("0.0.0.0", 8600, "--theme.base", "dark"), ROOT)]


def test_run_stopped_with_ctrl_c_exits_cleanly(monkeypatch):
    monkeypatch.setattr(console.subprocess, "call", FakeCall(raises=KeyboardInterrupt()))
    assert console.main(["run"]) == 0


def test_run_without_the_app_file_says_so(capsys, monkeypatch, tmp_path):
    fake = FakeCall()
    monkeypatch.setattr(console.subprocess, "call", fake)
    monkeypatch.setattr(console, "APP", tmp_path / "app.py")
    assert console.main(["run"]) == 2
    assert fake.calls == [] and "app.py is missing" in capsys.readouterr().err


def test_no_command_prints_usage_and_returns_2(capsys):
    assert console.main([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: decodescope run") and "decodescope decode" in out


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_usage_and_returns_0(capsys, flag):
    assert console.main([flag]) == 0
    assert capsys.readouterr().out.startswith("usage: decodescope run")


def shown(text: str) -> str:
    """A token as the table prints it: bare when it has no surrounding spaces, else quoted (written here
    from the README's description, not taken from the code)."""
    return repr(text)[1:-1] if text and text.strip() == text else repr(text)


@pytest.mark.parametrize("prompt", ["Beam search keeps", "The capital of France is"])
def test_beam_table_walks_the_best_hypothesis(capsys, monkeypatch, tiny_llama_folder, prompt):
    """Every row is a step of the best hypothesis, the one printed last, as transformers' beam search
    returns it: its token, and that token's probability given the hypothesis' own prefix (plain torch)."""
    lm, folder = tiny_llama_folder
    argv = ["decode", "--model", folder, "--prompt", prompt, "--strategy", "beam", "--num-beams", "3",
            "--max-new-tokens", "6"]
    code, out, err = run_cli(capsys, monkeypatch, console.main, argv)
    assert (code, err) == (0, "")
    ids = torch.tensor([lm.tokenizer(prompt).input_ids])
    best = lm.model.generate(ids, max_new_tokens=6, do_sample=False, num_beams=3,
                             attention_mask=torch.ones_like(ids))[0, ids.shape[1]:].tolist()
    best = best[:best.index(0) + 1] if 0 in best else best          # the end-of-text token (id 0) ends it
    rows = [line for line in out.splitlines() if line[:4].strip().isdigit()]
    assert len(rows) == len(best)
    for i, (row, token) in enumerate(zip(rows, best)):
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([ids[0].tolist() + best[:i]])).logits[0, -1]
        prob = float(torch.softmax(logits.float(), -1)[token])
        assert row.startswith(f"{i + 1:>4}  {shown(lm.token_texts[token]):<18} "), (i, row)
        assert float(row[25:].split()[0]) == pytest.approx(prob, abs=2e-4), (i, row)


def test_decode_help_names_the_command_typed_and_explains_every_option(capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, console.main, ["decode", "--help"])
    assert code == 0
    assert out.startswith("usage: decodescope decode") and "python -m engine" not in out
    options = out[out.index("options:"):]
    entries = re.split(r"\n(?=  -)", options)[1:]       # one entry per option: its flags, then its help
    flags = [e.split()[0].rstrip(",") for e in entries]
    assert {"--prompt", "--strategy", "--top-k", "--num-beams", "--tau", "--seed", "--top-n"} <= set(flags)
    for entry in entries:
        words = re.sub(r"^\s*(-[-\w]+( [A-Z_]+)?(, )?)+", "", entry).split()
        assert len(words) >= 3, f"no help for {entry.split()[0]}"
    # the engine's own command keeps its own name
    code, out, _ = run_cli(capsys, monkeypatch, engine_main, ["decode", "--help"])
    assert code == 0 and out.startswith("usage: python -m engine decode")


def test_usage_names_only_decodescope(capsys):
    assert console.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "python -m engine" not in out and "decodescope lens" in out
