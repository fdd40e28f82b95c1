"""Step by step's sampler order and advanced samplers in AppTest, on the tiny random Llama: each order shows the
settings its engine has (listed here from each engine's own documentation, not from the page's tables), a link
reproduces them, and the order comparison names the three orders.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"

# each engine's own samplers (SAMPLERS.md; llama.cpp's `common_params_sampling`, transformers' GenerationConfig,
# vLLM's SamplingParams): the settings Step by step offers for its order
OWN = {
    "transformers": {"typical_p", "epsilon_cutoff", "eta_cutoff", "top_h", "no_repeat_ngram_size"},
    "llama.cpp": {"presence_penalty", "frequency_penalty", "penalty_last_n", "dry_multiplier", "dry_base",
                  "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "top_n_sigma", "typical_p",
                  "xtc_probability", "xtc_threshold", "dynatemp_range", "dynatemp_exponent", "mirostat",
                  "mirostat_tau", "mirostat_eta", "samplers"},
    "vllm": {"presence_penalty", "frequency_penalty"},
}
EVERY = set().union(*OWN.values())


def texts(section: str, lang: str = "en") -> dict:
    return json.loads((ROOT / "assets" / "texts" / lang / f"{section}.json").read_text(encoding="utf-8"))


def open_page(folder, params=None, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = folder
    at.session_state["prompt"] = PROMPT
    at.session_state["max_new_tokens"] = 2
    for key, value in state.items():
        at.session_state[key] = value
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.switch_page("pages/step_by_step.py").run()
    assert not at.exception, at.exception
    return at


def sampler_widgets(at: AppTest) -> set:
    keys = {w.key for w in [*at.number_input, *at.text_input, *at.radio]}
    return keys & EVERY


@pytest.mark.parametrize("order", list(OWN))
def test_each_order_offers_the_samplers_its_engine_has(tiny_llama_folder, order):
    _, folder = tiny_llama_folder
    at = open_page(folder, strategy="sample", sampler_order=order)
    assert sampler_widgets(at) == OWN[order]
    words = texts("samplers")
    assert words["title"] in [e.label for e in at.expander]
    assert any(c.value == words[f"order_{order.replace('.', '_')}"] for c in at.caption)


def test_a_link_reproduces_the_samplers_and_only_its_orders_reach_the_decode(tiny_llama_folder):
    """The address sets the widgets; a setting another order has (epsilon here) stays in the address, unused."""
    _, folder = tiny_llama_folder
    link = {"strategy": "sample", "sampler_order": "llama.cpp", "typical_p": "0.9", "xtc_probability": "0.5",
            "xtc_threshold": "0.2", "mirostat": "2", "mirostat_tau": "4", "dry_multiplier": "0.8",
            "penalty_last_n": "-1", "samplers": "top_k;min_p;temperature", "epsilon_cutoff": "0.001"}
    at = open_page(folder, link)
    assert at.number_input(key="typical_p").value == pytest.approx(0.9)
    assert at.number_input(key="penalty_last_n").value == -1
    assert at.radio(key="mirostat").value == 2
    assert at.text_input(key="samplers").value == "top_k;min_p;temperature"
    config = at.session_state["sbs"].config
    assert (config.sampler_order, config.typical_p, config.xtc_probability, config.xtc_threshold, config.mirostat,
            config.mirostat_tau, config.dry_multiplier, config.penalty_last_n, config.samplers) == \
        ("llama.cpp", 0.9, 0.5, 0.2, 2, 4.0, 0.8, -1, "top_k;min_p;temperature")
    assert config.epsilon_cutoff == 0.0                    # transformers' alone: not used in llama.cpp's order
    assert at.query_params["epsilon_cutoff"] == "0.001"  # but kept for a switch back
    assert at.query_params["mirostat"] == "2"


def test_a_bad_sampler_value_in_a_link_is_one_line_not_a_traceback(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, {"strategy": "sample", "sampler_order": "llama.cpp", "dry_multiplier": "0.8",
                            "dry_sequence_breakers": "not json"})
    errors = [e.value.replace("\\", "") for e in at.error]
    assert len(errors) == 1 and "dry_sequence_breakers" in errors[0] and "JSON list" in errors[0], errors


def test_the_order_comparison_names_all_three_orders(tiny_llama_folder):
    """At temperature 3 and min-p 0.2, transformers and vLLM apply min-p after the temperature, llama.cpp before
    it (by hand below): one token named, kept by two orders, dropped by llama.cpp's at min-p."""
    lm, folder = tiny_llama_folder
    at = open_page(folder, strategy="sample", temperature=3.0, min_p=0.2, sampler_order="vllm")
    ids = lm.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    after = int((logits / 3 >= (logits / 3).max() + torch.log(torch.tensor(0.2))).sum())
    before = int((logits >= logits.max() + torch.log(torch.tensor(0.2))).sum())
    words = texts("pipeline")
    captions = [c.value for c in at.caption]
    for order, n in (("transformers", after), ("llama_cpp", before), ("vllm", after)):
        kept = words["orders_kept"] if n != 1 else words["orders_kept"].replace("tokens", "token")   # agreement
        assert kept.format(order=words[f"order_{order}"], n=f"{n:,}") in captions, order
    assert words["stages_order_vllm"] in captions
    case = [w.value for w in at.warning if "min-p" in w.value]
    assert len(case) == 1
    assert "kept by " + words["order_transformers"] + " and " + words["order_vllm"] in case[0]
    assert words["order_llama_cpp"] + " drops it at min-p" in case[0]


def test_the_caption_names_the_samplers_that_are_on(tiny_llama_folder):
    _, folder = tiny_llama_folder
    at = open_page(folder, strategy="sample", sampler_order="transformers", typical_p=0.9, epsilon_cutoff=0.0005)
    assert any("typical\\-p 0\\.9" in c.value and "ε 0\\.0005" in c.value for c in at.caption), \
        [c.value for c in at.caption]


def test_the_stage_table_shows_mirostats_mu_worked_out_by_hand(tiny_llama_folder):
    """Mirostat v2 at the first step (llama.cpp's rule): μ starts at 2τ; it keeps the tokens at most μ bits
    surprising; after the draw, μ ← μ − η · (surprise of the drawn token among the kept − τ)."""
    lm, folder = tiny_llama_folder
    at = open_page(folder, strategy="sample", sampler_order="llama.cpp", mirostat=2, mirostat_tau=4.0,
                   mirostat_eta=0.2)
    ids = lm.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
    mu = 8.0
    keep = -torch.log2(probs) <= mu
    chosen = at.session_state["sbs"].current.chosen_ids[0]
    assert bool(keep[chosen])
    mu_next = mu - 0.2 * (-math.log2(float(probs[chosen] / probs[keep].sum())) - 4.0)
    words = texts("pipeline")
    table = at.dataframe[0].value
    assert list(table[words["col_stage"]]) == [words["stage_mirostat"].format(value="4")]
    assert list(table[words["col_kept"]]) == [int(keep.sum())]
    assert list(table[words["col_state"]]) == [words["state_mu"].format(mu="8", mu_next=f"{mu_next:.4g}")]
    # the other orders have no mirostat: each says it left it out
    skipped = [c.value for c in at.caption if c.value.startswith(words["orders_skipped"].split("{settings}")[0]
                                                                   .format(order=words["order_transformers"]))]
    assert len(skipped) == 1 and texts("samplers")["mirostat"].lower() in skipped[0], [c.value for c in at.caption]


def test_the_stage_table_shows_xtcs_draw_and_whether_it_fired(tiny_llama_folder):
    """XTC fires when its draw is at most its probability (llama.cpp's rule): the table says which. The
    penalties stage before it, with presence alone on, is labelled with that setting, not the repeat's 1."""
    _, folder = tiny_llama_folder
    at = open_page(folder, strategy="sample", sampler_order="llama.cpp", xtc_probability=0.5, xtc_threshold=0.0,
                   presence_penalty=0.5)
    words = texts("pipeline")
    stage = next(s for s in at.session_state["sbs"].current.stages if s.name == "xtc")
    draw = stage.state["draw"]
    key = "state_draw_fired" if draw <= 0.5 else "state_draw_held"
    table = at.dataframe[0].value
    assert list(table[words["col_stage"]]) == ["penalties: presence 0.5", "XTC ≥ 0"]
    assert list(table[words["col_state"]])[1:] == [words[key].format(draw=f"{draw:.4g}")]


def test_with_mirostat_on_the_comparison_and_the_summary_say_mirostat_replaced_the_chain(tiny_llama_folder):
    """llama.cpp with mirostat runs temperature → mirostat alone (common_sampler_init): DRY, typical and top-k
    are llama.cpp's own samplers, replaced there, not missing; the step's summary names only what ran."""
    _, folder = tiny_llama_folder
    at = open_page(folder, strategy="sample", sampler_order="llama.cpp", temperature=0.7, mirostat=2, top_k=40,
                   dry_multiplier=0.8, typical_p=0.9)
    words, labels = texts("pipeline"), texts("samplers")
    captions = [c.value for c in at.caption]
    llama = words["order_llama_cpp"]
    assert not [c for c in captions if c.startswith(words["orders_skipped"].split("{settings}")[0].format(order=llama))]
    replaced = [c for c in captions if c.startswith(words["orders_replaced"].split(",")[0].format(order=llama))]
    assert len(replaced) == 1, captions
    for label in (labels["dry_multiplier"], labels["typical_p"].lower(), "top-k"):
        assert label in replaced[0], replaced
    assert words["stages_order_llama_cpp_mirostat"] in captions
    summary = [c for c in captions if "mirostat v2" in c]
    assert summary and all(w not in summary[0] for w in ("DRY", "typical", "top\\-k")), summary


def test_orders_that_keep_the_same_tokens_still_name_the_largest_change_in_probability(tiny_llama_folder):
    """Presence 0.5 alone at the first step: llama.cpp subtracts 0.5 from the logit of every token of the last
    64 of the context (by hand below); vLLM counts only generated tokens (none yet); transformers has no
    presence penalty. All keep every token, but the probabilities differ: the page names the token whose
    probability differs most, each order's value, and the stage that moved it."""
    import re

    lm, folder = tiny_llama_folder
    at = open_page(folder, strategy="sample", sampler_order="llama.cpp", presence_penalty=0.5)
    ids = lm.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    penalised = logits.clone()
    penalised[sorted(set(ids[-64:]))] -= 0.5
    raw, llama = torch.softmax(logits, -1), torch.softmax(penalised, -1)
    token = int((llama - raw).abs().argmax())
    words = texts("pipeline")
    assert words["orders_same_all"].format(n=f"{len(raw):,}") in [c.value for c in at.caption]
    said = [m.value for m in at.markdown if m.value.startswith(words["orders_gap"].split("“")[0])]
    assert len(said) == 1, [m.value for m in at.markdown]
    from figures.labels import for_markdown, visible
    assert "“" + for_markdown(visible(lm.token_texts[token])) + "”" in said[0]
    numbers = [float(x) for x in re.findall(r"\d\\?\.\d{4}", said[0].replace("\\", ""))]
    # p before any stage; transformers', llama.cpp's and vLLM's; before and after the penalties stage
    expected = [raw[token], raw[token], llama[token], raw[token], raw[token], llama[token]]
    assert numbers == pytest.approx([float(x) for x in expected], abs=2e-4)
    assert f"{words['order_llama_cpp']}" in said[0] and "penalties:" in said[0]
