"""Steps are numbered from 1 wherever people read them; Step.index stays 0-based in the trace."""
from __future__ import annotations

import torch

from engine import DecodeConfig, decode


def test_cli_table_counts_steps_from_one(llama, monkeypatch, capsys):
    import engine.model
    from engine.cli.main import main

    monkeypatch.setattr(engine.model, "load_model", lambda name=None, progress=None, **placement: llama)
    assert main(["decode", "--prompt", "The capital of", "--max-new-tokens", "5"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()[1:] if line[:4].strip().isdigit()]
    assert [int(line[:4]) for line in lines] == [1, 2, 3, 4, 5]
    # the row numbered 1 is the model's first greedy token, read off the logits directly
    ids = llama.tokenizer("The capital of", return_tensors="pt").input_ids
    with torch.no_grad():
        first = int(llama.model(ids).logits[0, -1].argmax())
    text = llama.tokenizer.decode([first]).strip()
    assert text and text in lines[0][6:24]


def test_trace_keeps_zero_based_indices(llama):
    trace = decode(llama, "The capital of", DecodeConfig(max_new_tokens=3))
    assert [s.index for s in trace.steps] == [0, 1, 2]


def test_candidates_title_names_the_chosen_token_beyond_the_top(llama):
    """A forced pick from far down the list: the title says top N + the chosen (its rank), not top N+1."""
    from engine.decoding.decoder import Decoder
    from figures.candidates import candidates_figure

    ids = llama.tokenizer("The capital of", return_tensors="pt").input_ids
    with torch.no_grad():
        order = llama.model(ids).logits[0, -1].argsort(descending=True).tolist()
    token = order[66]                                   # rank 67, read off the logits
    config = DecodeConfig(max_new_tokens=1, top_n=20)
    step = Decoder(llama, "The capital of", config, forced={0: token}).run().steps[0]
    title = candidates_figure(step, config).layout.title.text
    assert title == "Step 1: the top 20 candidates + the chosen token (rank 67)"      # the words the page shows
    plain = Decoder(llama, "The capital of", config).run().steps[0]     # greedy's pick is rank 1
    assert candidates_figure(plain, config).layout.title.text == "Step 1: the top 20 candidates for the next token"


def test_durations_switch_to_ms_past_a_thousand_microseconds():
    from figures.labels import duration

    assert duration(0.000850) == "850.0 µs"
    assert duration(0.001500) == "1.50 ms"
    assert duration(2.5) == "2.50 s"
