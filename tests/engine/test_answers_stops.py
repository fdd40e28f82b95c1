"""Answers that end at a stop string, against brute force: a tiny random model of 6 tokens whose every sequence
to the depth is enumerated with plain forward passes, its text decoded by the tokenizer and searched with
str.find (no byte tables, no grouping code of the app's); and beam search with stop strings against
transformers' `generate` with the stopping tokens as end tokens."""
from __future__ import annotations

import json
import math

import pytest
import torch

from engine.answers import Distribution, TreeSettings, draw_samples, grow_tree
from engine.answers.record import from_json, to_json
from engine.answers.run import explore
from engine.answers.stops import check_stops, escape, parse_stop_lines, stop_lines, unescape
from engine.errors import ConfigError, TraceFormatError
from tiny_models import tiny_llama, tiny_tokenizer

pytestmark = pytest.mark.tiny
VOCAB, END, PROMPT, DEPTH = 6, 0, [1, 2, 3], 3
# the 6 tokens: <|endoftext|> <|im_start|> <|im_end|> ! " #
# '"' is a token of its own; "#!" is split across two tokens; "m_s" lies inside the special token <|im_start|>
STOPS = ('"', "#!", "m_s")


@pytest.fixture(scope="module")
def small():
    return tiny_llama(seed=3, vocab_size=VOCAB)


def hand_logprobs(logits: torch.Tensor, dist: Distribution) -> torch.Tensor:
    x = logits.double()
    if dist.kind == "sampler":
        x = x / dist.temperature
        if dist.top_k:
            kth = torch.topk(x, dist.top_k).values[-1]
            x = torch.where(x < kth, torch.full_like(x, -math.inf), x)
    return torch.log_softmax(x, -1)


def brute_force(lm, stops, depth: int, dist: Distribution) -> tuple:
    """({(prefix ids, text): log P} of the answers, {prefix of `depth` tokens: log P} of the outcomes cut at the
    depth): every path followed token by token, its text decoded and searched for the first stop string."""
    decode = tiny_tokenizer().decode
    answers: dict = {}
    cut: dict = {}

    def add(store, key, lp):
        store[key] = float(torch.logaddexp(torch.tensor(store.get(key, -math.inf)), torch.tensor(lp)))

    def visit(path: tuple, lp: float) -> None:
        with torch.inference_mode():
            logits = lm.model(input_ids=torch.tensor([PROMPT + list(path)])).logits[0, -1]
        step = hand_logprobs(logits, dist)
        for t in range(VOCAB):
            p = lp + step[t].item()
            if p == -math.inf:
                continue
            if t == END:
                add(answers, (path, decode(list(path))), p)
                continue
            text = decode(list(path) + [t])
            hits = [text.find(s) for s in stops if s in text]
            if hits:
                add(answers, (path, text[:min(hits)]), p)
            elif len(path) < depth:
                visit(path + (t,), p)
            else:
                add(cut, path, p)

    visit((), 0.0)
    return answers, cut


DISTS = [Distribution(), Distribution("sampler", temperature=0.7, top_k=4)]


@pytest.mark.parametrize("dist", DISTS, ids=["model", "sampler"])
def test_whole_tree_with_stop_strings_equals_brute_force(small, dist):
    """Every answer (each prefix with each text it can end on) has brute force's probability, the ledger adds up
    to 1 within 1e-9, and the mass cut at the depth is brute force's."""
    tree = grow_tree(small, PROMPT, TreeSettings(depth=DEPTH, budget=400, branch=VOCAB, batch=7, distribution=dist,
                                                 stops=STOPS))
    answers, cut = brute_force(small, STOPS, DEPTH, dist)
    found = {a.key: a.logprob for a in tree.answers}
    assert set(found) == set(answers)
    for key, lp in found.items():
        assert lp == pytest.approx(answers[key], abs=1e-5), key
    if dist.kind == "model":   # every kind of stop string ended some answer: split across two tokens, in a special one
        stopped = [a for a in tree.answers if a.stop]
        assert any(len(a.text) < len(tiny_tokenizer().decode(list(a.token_ids))) for a in stopped)   # "#!"
        assert any(a.text.endswith("<|i") for a in stopped)                                           # "m_s"
    ledger = tree.ledger
    # (float32 logits: a batched pass over the cache and a plain one differ by ~1e-8)
    assert ledger.answers == pytest.approx(sum(math.exp(v) for v in answers.values()), abs=1e-6)
    assert ledger.cut_at_depth == pytest.approx(sum(math.exp(v) for v in cut.values()), abs=1e-6)
    assert ledger.left_out == pytest.approx(0, abs=1e-12) and ledger.open_prefixes == 0
    assert ledger.total == pytest.approx(1, abs=1e-9)


@pytest.mark.parametrize("budget,branch", [(4, 2), (10, 3), (30, 2)])
def test_a_tree_cut_short_keeps_an_exact_ledger_and_a_true_bound(small, budget, branch):
    """Answers not kept at a prefix go to 'left out' with the children not kept: the four parts still add to 1,
    the answers found are brute force's, and no answer not found beats the bound."""
    tree = grow_tree(small, PROMPT, TreeSettings(depth=DEPTH, budget=budget, branch=branch, batch=3, stops=STOPS))
    answers, _ = brute_force(small, STOPS, DEPTH, Distribution())
    assert tree.ledger.total == pytest.approx(1, abs=1e-9)
    for a in tree.answers:
        assert a.logprob == pytest.approx(answers[a.key], abs=1e-6)
    found = {a.key for a in tree.answers}
    assert all(math.exp(v) <= tree.ledger.bound * (1 + 1e-6) for k, v in answers.items() if k not in found)
    truth = sorted(answers.values(), reverse=True)
    for k in range(1, tree.certified_count + 1):
        assert tree.answers[k - 1].logprob == pytest.approx(truth[k - 1], abs=1e-6)


def test_samples_with_stop_strings_are_rescored_exactly(small):
    summary = draw_samples(small, PROMPT, TreeSettings(depth=DEPTH, stops=STOPS), n=64, seed=5)
    answers, cut = brute_force(small, STOPS, DEPTH, Distribution())
    assert sum(o.count for o in summary.outcomes) == 64
    assert any(o.complete and o.text != tiny_tokenizer().decode(list(o.token_ids)) for o in summary.outcomes)
    for o in summary.outcomes:
        want = answers[(o.token_ids, o.text)] if o.complete else cut[o.token_ids]
        assert o.logprob == pytest.approx(want, abs=1e-6), o
    assert draw_samples(small, PROMPT, TreeSettings(depth=DEPTH, stops=STOPS), n=64, seed=5) == summary


def reference_beam(lm, prompt_ids, width, length, stop_ids):
    """transformers' beam search with every stopping token as an end token: its best sequence's new tokens, up
    to and including the first end."""
    out = lm.model.generate(torch.tensor([prompt_ids]), num_beams=width, max_new_tokens=length, do_sample=False,
                            length_penalty=1.0, early_stopping=False, eos_token_id=[0, *stop_ids], pad_token_id=0)
    tokens = out[0, len(prompt_ids):].tolist()
    end = next((i for i, t in enumerate(tokens) if t in (0, *stop_ids)), len(tokens) - 1)
    return tokens[:end + 1]


@pytest.mark.parametrize("stops", [("e",), (".", " t")], ids=["e", "period-or-space-t"])
@pytest.mark.parametrize("width", [2, 4])
def test_beam_search_with_stop_strings_is_generates_with_the_stopping_tokens_as_ends(stops, width):
    """Stop strings that lie inside single tokens (every token holding one is a stopping token): the search is
    transformers' own with those tokens added to eos_token_id."""
    from engine.answers.stop_beam import beam_tokens
    from engine.answers.stops import Endings
    from engine.answers.tree import end_ids

    lm = tiny_llama(seed=1)
    prompt_ids = lm.tokenizer("The capital of")["input_ids"]
    endings = Endings(lm, end_ids(lm), stops)
    stop_ids = endings.inner_ids.tolist()
    assert len(stop_ids) >= 3
    for length in (3, 6):
        got = beam_tokens(lm, prompt_ids, width, length, endings)
        assert got == reference_beam(lm, prompt_ids, width, length, stop_ids), (width, length)


def test_landings_and_samples_match_the_trees_answers_and_the_file_keeps_the_stops(small):
    """Greedy's answer with stop strings is greedy's tokens cut at the first stop; every strategy's answer is
    scored as the tree scores it; the run's file keeps the stop strings and reads back the same answers."""
    from engine.answers.landed import landings
    from engine.answers.stops import Endings
    from engine.answers.tree import end_ids

    settings = TreeSettings(depth=DEPTH, budget=400, branch=VOCAB, batch=7, stops=STOPS)
    tree = grow_tree(small, PROMPT, settings)
    answers, cut = brute_force(small, STOPS, DEPTH, Distribution())
    landed = landings(small, tiny_tokenizer().decode(PROMPT), tree, False, [2, 3])
    greedy = small.model.generate(torch.tensor([PROMPT]), max_new_tokens=DEPTH + 1, do_sample=False,
                                  eos_token_id=None, pad_token_id=0)[0, len(PROMPT):].tolist()
    end = Endings(small, end_ids(small), STOPS).first_end(greedy)
    assert landed[0].strategy == "greedy" and landed[0].token_ids == tuple(greedy[:end if end >= 0 else DEPTH])
    for x in landed:
        want = answers[x.key] if x.complete else cut[x.token_ids]
        assert x.logprob == pytest.approx(want, abs=1e-6), x
        assert x.found == x.complete and (not x.complete or x.rank >= 1)


def test_the_run_file_keeps_the_stop_strings(llama):
    small = llama
    settings = TreeSettings(depth=DEPTH, budget=40, branch=3, batch=7, stops=("\n", "#!"))
    run = explore(small, "The capital of", settings, beams=(1, 2), samples=12)
    again = from_json(to_json(run))
    assert again.tree.settings.stops == ("\n", "#!")
    assert [(a.key, a.stop) for a in again.tree.answers] == [(a.key, a.stop) for a in run.tree.answers]
    assert again.tree.ledger.total == pytest.approx(1, abs=1e-9)
    claims = json.loads(to_json(explore(small, "The capital of", TreeSettings(depth=2, budget=8, branch=3),
                                        samples=4)))
    del claims["settings"]["stops"]                     # a file written before stop strings: it has none
    assert from_json(json.dumps(claims)).tree.settings.stops == ()
    claims["answers"][0].append(True)                   # an answer that says a stop string ended it
    with pytest.raises(TraceFormatError, match="without stop strings"):
        from_json(json.dumps(claims))
    for bad, words in ((["x" * 40], "1 to 32"), (list("abcdefghi"), "more than 8"), ([""], "1 to 32"),
                       ("\n", "list")):
        broken = json.loads(to_json(run))
        broken["settings"]["stops"] = bad
        with pytest.raises(TraceFormatError, match=words):
            from_json(json.dumps(broken))


@pytest.mark.parametrize("typed,stops", [("\\n", ("\n",)), ("。\n\\n\n\nQ:", ("。", "\n", "Q:")),
                                         ("a\\\\n", ("a\\n",)), ("\\x", ("\\x",))])
def test_typed_stop_strings_read_back(typed, stops):
    assert parse_stop_lines(typed) == stops
    assert parse_stop_lines(stop_lines(stops)) == stops and unescape(escape("\\\n")) == "\\\n"


@pytest.mark.parametrize("stops,words", [(("",), "1 to 32"), (("x" * 33,), "1 to 32"), (tuple("abcdefghi"), "at most"),
                                         (("\ud800",), "surrogate"), ("\n", "list")])
def test_bad_stop_strings_are_named(stops, words):
    with pytest.raises(ConfigError, match=words):
        check_stops(stops)
    with pytest.raises(ConfigError, match="stop"):
        TreeSettings(stops=stops).check()


@pytest.mark.cli
def test_the_command_takes_stop_strings_names_them_and_writes_them(capsys, monkeypatch, tiny_llama_folder, tmp_path):
    from cli_helpers import run_cli
    from engine.cli.main import main

    _, folder = tiny_llama_folder
    target = tmp_path / "run.json"
    code, out, err = run_cli(capsys, monkeypatch, main, ["answers", "--prompt", "The capital of", "--model", folder,
                                                         "--depth", "3", "--budget", "30", "--samples", "4",
                                                         "--stop", "\\n", "--stop", "。", "--json", str(target)])
    assert code == 0, err
    assert "ends: an answer ends at an end token or before a stop string: '\\n', '。'" in out
    assert from_json(target.read_text(encoding="utf-8")).tree.settings.stops == ("\n", "。")
    code, out, err = run_cli(capsys, monkeypatch, main, ["answers", "--prompt", "x", "--model", folder,
                                                         "--stop", "y" * 40])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--stop" in lines[0] and "1 to 32" in lines[0], err
