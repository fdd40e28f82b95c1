"""The logit lens: its last layer is the model's own output, and every layer goes through the final norm."""
from __future__ import annotations

import pytest
import torch

from engine import ConfigError, DecodeConfig, decode
from engine.inside.lens import lens_next, lens_of_trace


def named_final_norm(lm):
    """The final norm by its architecture-specific name, not by the lens's search."""
    return lm.model.model.norm if lm.name == "tiny-llama" else lm.model.transformer.ln_f


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def run(request):
    from tiny_models import tiny_gpt2, tiny_llama

    lm = tiny_llama() if request.param == "llama" else tiny_gpt2()
    trace = decode(lm, "The capital of France is", DecodeConfig(strategy="sample", max_new_tokens=6, seed=2))
    return lm, trace, lens_of_trace(lm, trace, top=5)


def test_last_layer_equals_the_model_logits(run):
    lm, trace, lens = run
    ids = torch.tensor([trace.prompt_token_ids + trace.best.token_ids])
    with torch.no_grad():
        probs = torch.softmax(lm.model(input_ids=ids).logits[0].float(), -1)
    first = len(trace.prompt_token_ids) - 1
    assert lens.layers == lm.facts.layers + 1
    assert lens.matches_model
    for column, step in enumerate(trace.steps):
        cell = lens.cells[-1][column]
        expected = torch.topk(probs[first + column], 5)
        assert cell.top_ids == expected.indices.tolist()
        assert cell.top_probs == pytest.approx(expected.values.tolist(), abs=1e-5)
        # and the decode's own record of the step, made with the KV cache
        chosen = next(c for c in step.candidates if c.token_id == step.chosen_ids[0])
        assert cell.chosen_prob == pytest.approx(chosen.prob, abs=1e-5)
        assert cell.chosen_rank == chosen.rank


def test_every_layer_goes_through_the_final_norm(run):
    lm, trace, lens = run
    ids = torch.tensor([trace.prompt_token_ids + trace.best.token_ids])
    with torch.no_grad():
        hidden = lm.model(input_ids=ids, output_hidden_states=True).hidden_states
        head, norm = lm.model.get_output_embeddings(), named_final_norm(lm)
        position = len(trace.prompt_token_ids) - 1 + 2          # the prediction of step 2
        for layer in range(lm.facts.layers):                      # rows before the last: embeddings, layer 1, ...
            normed = torch.softmax(head(norm(hidden[layer][0, position])), -1)
            raw = torch.softmax(head(hidden[layer][0, position]), -1)
            cell = lens.cells[layer][2]
            assert cell.top_probs == pytest.approx(torch.topk(normed, 5).values.tolist(), abs=1e-5)
            assert cell.chosen_prob == pytest.approx(float(normed[trace.best.token_ids[2]]), abs=1e-5)
            # without the norm the numbers differ: the test would catch a lens that skips it
            assert not torch.allclose(raw, normed, atol=1e-3)


def test_first_top_layer(run):
    lm, trace, lens = run
    for column in range(len(trace.steps)):
        layer = lens.first_top_layer(column)
        ranks = [lens.cells[row][column].chosen_rank for row in range(lens.layers)]
        expected = ranks.index(1) if 1 in ranks else None
        assert layer == expected


def test_next_token_lens_is_greedy_choice(llama):
    lens = lens_next(llama, "The capital of France is")
    greedy = decode(llama, "The capital of France is", DecodeConfig(max_new_tokens=1))
    assert lens.chosen_ids == greedy.best.token_ids
    assert lens.first_top_layer(0) is not None and lens.cells[-1][0].chosen_rank == 1


def test_soft_runs_are_refused_in_one_sentence(llama):
    trace = decode(llama, "The capital", DecodeConfig(strategy="soft", max_new_tokens=2))
    with pytest.raises(ConfigError, match="mixtures of embeddings"):
        lens_of_trace(llama, trace)


def test_a_longer_run_reuses_the_earlier_columns(llama):
    config = DecodeConfig(strategy="sample", max_new_tokens=7, seed=4)
    from engine.decoding.decoder import Decoder

    decoder = Decoder(llama, "The capital of France is", config)
    for _ in range(3):
        decoder.step()
    short = lens_of_trace(llama, decoder.trace())
    while not decoder.finished:
        decoder.step()
    whole = decoder.trace()
    grown = lens_of_trace(llama, whole, previous=short)
    fresh = lens_of_trace(llama, whole)
    assert grown.steps == fresh.steps == list(range(len(whole.steps)))
    assert grown.chosen_ids == fresh.chosen_ids and grown.context == fresh.context
    for row_grown, row_fresh in zip(grown.cells, fresh.cells):
        for a, b in zip(row_grown, row_fresh):
            assert a.top_ids == b.top_ids and a.chosen_rank == b.chosen_rank
            assert a.chosen_prob == pytest.approx(b.chosen_prob, abs=1e-5)
    # a lens of another run is not reused
    other = decode(llama, "Beam search keeps", config)
    assert lens_of_trace(llama, other, previous=short).context[:3] == other.prompt_token_ids[:3]
    assert lens_of_trace(llama, other, previous=short).chosen_ids == other.best.token_ids
