"""Every stage on, in each order, through the decoders; the states recorded at each step (mirostat's μ, XTC's
draw, DRY's run, the dynamic temperature, the penalties' window) survive a JSON round trip and the trace check,
and a file with a hostile state is refused with one line."""
from __future__ import annotations

import json
import math

import pytest
import torch

from engine import DecodeConfig, Trace, TraceFormatError, decode
from engine.samplers.chain import prepare
from engine.decoding.decoder import Decoder
from engine.errors import ConfigError
from engine.samplers.shaping import build_processors
from engine.samplers.stages import chain_in_order

ALL_ON = {
    "transformers": dict(repetition_penalty=1.3, no_repeat_ngram_size=3, temperature=1.2, top_h=0.9, top_k=60,
                         top_p=0.95, min_p=0.01, typical_p=0.95, epsilon_cutoff=0.001, eta_cutoff=0.001),
    "llama.cpp": dict(repetition_penalty=1.3, presence_penalty=0.3, frequency_penalty=0.2, penalty_last_n=16,
                      dry_multiplier=0.8, dry_allowed_length=1, top_n_sigma=3.0, top_k=60, typical_p=0.97,
                      top_p=0.97, min_p=0.01, xtc_probability=0.5, xtc_threshold=0.05, temperature=1.2,
                      dynatemp_range=0.4),
    "vllm": dict(repetition_penalty=1.3, presence_penalty=0.3, frequency_penalty=0.2, temperature=1.2, min_p=0.01,
                 top_k=60, top_p=0.95),
}
STAGES = {"transformers": ["repetition_penalty", "no_repeat_ngram", "temperature", "top_h", "top_k", "top_p", "min_p",
                           "typical_p", "epsilon", "eta"],
          "llama.cpp": ["penalties", "dry", "top_n_sigma", "top_k", "typical_p", "top_p", "min_p", "xtc",
                        "temperature"],
          "vllm": ["penalties", "temperature", "min_p", "top_k", "top_p"]}
PROMPT = "The capital of France is Paris. The capital of France is"


def round_trip(trace: Trace) -> Trace:
    again = Trace.from_json(trace.to_json())
    assert again.to_dict() == trace.to_dict()
    return again


@pytest.mark.parametrize("order", list(ALL_ON))
@pytest.mark.parametrize("strategy", ["sample", "greedy", "gumbel"])
def test_every_stage_on_decodes_and_round_trips(llama, order, strategy):
    config = DecodeConfig(strategy=strategy, sampler_order=order, max_new_tokens=8, seed=3, **ALL_ON[order])
    trace = round_trip(decode(llama, PROMPT, config))
    assert len(trace.steps) == 8
    names = [s.name for s in trace.steps[0].stages]
    if strategy == "greedy":      # no truncation: the stages that read the history only
        assert names == [n for n in STAGES[order] if n in ("repetition_penalty", "no_repeat_ngram", "penalties",
                                                           "dry")]
    else:
        assert names == STAGES[order]
    for step in trace.steps:
        assert step.chosen_ids[0] in [c.token_id for c in step.candidates if c.kept]


def test_llama_cpp_states_are_recorded(llama):
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", max_new_tokens=10, seed=1,
                          **ALL_ON["llama.cpp"])
    trace = round_trip(decode(llama, PROMPT, config))
    prompt = len(trace.prompt_token_ids)
    fired = []
    for i, step in enumerate(trace.steps):
        states = {s.name: s.state for s in step.stages}
        assert states["penalties"] == {"window": min(16, prompt + i)}
        assert states["dry"]["run"] >= 1 or states["dry"]["penalised"] == 0
        assert set(states["xtc"]) <= {"draw", "fired"}
        if "draw" in states["xtc"]:
            assert states["xtc"]["fired"] == (states["xtc"]["draw"] <= 0.5)
            fired.append(states["xtc"]["fired"])
        assert 0.8 <= states["temperature"]["temperature"] <= 1.6          # 1.2 ± 0.4
        assert states["top_k"] == {}
    assert fired
    # the prompt repeats "The capital of France is": DRY penalises the token that would go on repeating it
    first = {s.name: s.state for s in trace.steps[0].stages}["dry"]
    assert first["run"] >= 5 and first["penalised"] >= 1


def test_a_step_recomputed_has_the_same_xtc_draw(llama):
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", max_new_tokens=4, seed=5,
                          xtc_probability=0.5, xtc_threshold=0.05)
    one, two = decode(llama, PROMPT, config), decode(llama, PROMPT, config)
    assert [s.stages[0].state for s in one.steps] == [s.stages[0].state for s in two.steps]
    other = decode(llama, PROMPT, config.replace(seed=6))
    assert [s.stages[0].state for s in one.steps] != [s.stages[0].state for s in other.steps]


@pytest.mark.parametrize("version", [1, 2])
def test_mirostat_mu_is_carried_recorded_and_replayed(llama, version):
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", mirostat=version, mirostat_tau=3.0,
                          mirostat_eta=0.2, temperature=0.9, max_new_tokens=6, seed=2)
    decoder = Decoder(llama, PROMPT, config)
    trace = round_trip(decoder.run())
    states = [step.stages[-1].state for step in trace.steps]
    assert [s.name for s in trace.steps[0].stages] == ["temperature", "mirostat"]
    assert states[0]["mu"] == pytest.approx(6.0)                                # μ starts at 2τ
    for step, state, following in zip(trace.steps, states, states[1:] + [None]):
        # μ' = μ - η (surprise of the drawn token in the kept set - τ), from the recorded distribution
        chosen = next(c for c in step.candidates if c.token_id == step.chosen_ids[0])
        p = step.stages[-1].probs[step.candidates.index(chosen)]
        assert state["mu_next"] == pytest.approx(state["mu"] - 0.2 * (-math.log2(p) - 3.0), abs=1e-5)
        if following is not None:
            assert following["mu"] == pytest.approx(state["mu_next"])
    # a branch at step 3 (the same token forced) and a replay from the start find the same μ
    branch = decoder.fork(3, trace.steps[3].chosen_ids[0])
    branch.step()
    assert branch.steps[3].stages[-1].state["mu"] == pytest.approx(states[3]["mu"])
    assert branch.steps[3].stages[-1].state["mu_next"] == pytest.approx(states[3]["mu_next"])
    replay = decode(llama, PROMPT, config)
    assert [s.stages[-1].state["mu"] for s in replay.steps] == pytest.approx([s["mu"] for s in states])


def test_mirostat_needs_a_sampling_strategy():
    with pytest.raises(ConfigError, match="mirostat"):
        DecodeConfig(strategy="greedy", sampler_order="llama.cpp", mirostat=2).validate()


@pytest.mark.parametrize("order", list(ALL_ON))
def test_beam_search_with_penalties_in_each_order(llama, order):
    penalties = {k: v for k, v in ALL_ON[order].items()
                 if k in ("repetition_penalty", "presence_penalty", "frequency_penalty", "no_repeat_ngram_size",
                          "penalty_last_n", "dry_multiplier", "dry_allowed_length")}
    config = DecodeConfig(strategy="beam", num_beams=3, sampler_order=order, max_new_tokens=6, **penalties)
    trace = round_trip(decode(llama, PROMPT, config))
    plain = decode(llama, PROMPT, DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=6))
    assert trace.best.token_ids != plain.best.token_ids           # the penalties changed the search
    if order == "transformers":                                   # and no 3-gram of the context repeats
        context = trace.prompt_token_ids + trace.best.token_ids
        grams = [tuple(context[i:i + 3]) for i in range(len(context) - 2)]
        assert len(grams[-6:]) == len(set(grams[-6:]) - set(grams[:-6]))
    else:                                                         # presence, frequency (and DRY) on top of it
        repetition = decode(llama, PROMPT, DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=6,
                                                        repetition_penalty=penalties["repetition_penalty"]))
        assert trace.best.token_ids != repetition.best.token_ids


def test_beam_search_in_vllm_order_penalises_prompt_tokens_and_counts_output():
    logits = torch.zeros(1, 4)
    processors = build_processors(DecodeConfig(strategy="beam", sampler_order="vllm", presence_penalty=1.0))
    prepare(processors, prompt_length=2)
    rows = processors(torch.tensor([[0, 1, 2], [0, 1, 3]]), logits.repeat(2, 1))
    assert rows.tolist() == [[0, 0, -1, 0], [0, 0, 0, -1]]       # each beam's own output


# ---- states read from a file -----------------------------------------------------------
@pytest.fixture(scope="module")
def stated(llama):
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", max_new_tokens=2, seed=1,
                          xtc_probability=0.5, xtc_threshold=0.05, dynatemp_range=0.3, presence_penalty=0.2)
    return json.loads(decode(llama, PROMPT, config).to_json())


def stage_of(data, name):
    return next(s for s in data["steps"][0]["stages"] if s["name"] == name)


@pytest.mark.parametrize("name,state,says", [
    ("xtc", {"draw": 1e400}, "finite"),
    ("xtc", {"draw": 7.0}, "between 0 and 1"),
    ("xtc", {"fired": 1}, "true or false"),
    ("temperature", {"temperature": -1.0}, "between"),
    ("penalties", {"window": 2.5}, "whole number"),
    ("penalties", {"window": 10**30}, "between"),
    ("penalties", {"mu": 1.0}, "records no state 'mu'"),
    ("penalties", {f"k{i}": 1.0 for i in range(9)}, "at most 4"),
    ("penalties", {"window": None}, "null"),
    ("penalties", ["window"], "expected an object"),
])
def test_a_hostile_state_is_refused_with_one_line(stated, name, state, says):
    data = json.loads(json.dumps(stated))
    stage_of(data, name)["state"] = state
    text = json.dumps(data).replace("1e+400", "1e400")
    if "1e400" not in text and state == {"draw": 1e400}:
        text = text.replace("Infinity", "1e400")
    with pytest.raises(TraceFormatError) as caught:
        Trace.from_json(text)
    message = str(caught.value)
    assert "\n" not in message and says in message and len(message) < 400


def test_a_file_without_states_still_reads(stated):
    data = json.loads(json.dumps(stated))
    for stage in data["steps"][0]["stages"]:
        stage.pop("state", None)
    trace = Trace.from_json(json.dumps(data))
    assert all(s.state == {} for s in trace.steps[0].stages)


@pytest.mark.parametrize("order,settings,names", [
    ("transformers", dict(repetition_penalty=1.2, no_repeat_ngram_size=2, top_k=30),
     ["repetition_penalty", "no_repeat_ngram", "grammar", "top_k"]),
    ("llama.cpp", dict(presence_penalty=0.2, dry_multiplier=0.5, top_k=30),
     ["penalties", "dry", "grammar", "top_k"]),
    ("vllm", dict(frequency_penalty=0.2, top_k=30), ["penalties", "grammar", "top_k"]),
])
def test_a_grammar_comes_after_the_stages_that_read_the_history(llama, order, settings, names):
    config = DecodeConfig(strategy="sample", sampler_order=order, max_new_tokens=6, grammar_kind="choices",
                          grammar=json.dumps(["Paris", "Rome", "Lyon"]), **settings)
    trace = decode(llama, PROMPT, config)
    assert [s.name for s in trace.steps[0].stages] == names
    assert trace.best.text.strip() in ("Paris", "Rome", "Lyon")


@pytest.mark.parametrize("order", list(ALL_ON))
def test_speculative_sampling_checks_drafts_with_every_stage_on(llama, order):
    config = DecodeConfig(strategy="speculative", draft="prompt-lookup:3", verify="sample", sampler_order=order,
                          max_new_tokens=8, **ALL_ON[order])
    trace = round_trip(decode(llama, PROMPT, config))
    assert [s.name for s in trace.steps[0].stages] == STAGES[order]
    assert sum(len(r.emitted_ids) for r in trace.rounds) == len(trace.steps) == 8


def test_the_stage_view_recomputes_a_mirostat_step_with_its_recorded_mu(llama):
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", mirostat=2, mirostat_tau=2.0,
                          mirostat_eta=0.5, max_new_tokens=4, seed=4)
    trace = decode(llama, PROMPT, config)
    step = trace.steps[3]
    context = torch.tensor([trace.prompt_token_ids + trace.best.token_ids[:3]])
    with torch.no_grad():
        logits = llama.model(context).logits[0, -1].float()
    ids = [c.token_id for c in step.candidates]
    recorded = step.stages[-1]
    again = chain_in_order(llama.token_texts, config, context, logits, ids, "llama.cpp",
                           prompt_length=len(trace.prompt_token_ids), mu=recorded.state["mu"]).stages[-1]
    assert again.state["mu"] == recorded.state["mu"] and again.kept_count == recorded.kept_count
    assert again.probs == pytest.approx(recorded.probs, abs=1e-5)


def test_a_file_with_more_stages_than_a_chain_has_is_refused(stated):
    data = json.loads(json.dumps(stated))
    data["steps"][0]["stages"] = data["steps"][0]["stages"][:1] * 40
    with pytest.raises(TraceFormatError, match="40 stages; a chain has at most 19"):
        Trace.from_json(json.dumps(data))
