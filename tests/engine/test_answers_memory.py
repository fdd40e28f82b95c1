"""What Whole answers, Compare's lanes and the landings' decodes hold in memory and how often they read the prompt:
the prompt's keys and values are held once however many rows continue it, a pass takes rows in runs within a
budget, a long prompt is read in parts (each a chance to stop), and the prompt is read once for the tree, the
landings and the samples. The memory is counted off the caches the model is handed (distinct tensor storages),
the numbers are checked against plain forward passes, never against the code's own earlier output."""
from __future__ import annotations

import math

import pytest
import torch

from engine import DecodeConfig, decode
from engine.answers import TreeSettings, draw_samples, grow_tree
from engine.answers import samples as samples_module
from engine.answers import tree as tree_module
from engine.answers.passes import PromptCache
from engine.answers.run import explore
from engine.decoding import prefill
from engine.decoding.lanes import decode_lanes
from tiny_models import tiny_gemma3, tiny_llama

pytestmark = pytest.mark.tiny
LONG = [5 + (7 * i) % 40 for i in range(120)]       # 120 prompt tokens: each row's copy would be 120 positions


def held_bytes(past) -> int:
    """Bytes of the distinct storages behind every tensor a cache's layers hold (a view shares its storage)."""
    seen = {}
    for layer in past.layers:
        for value in vars(layer).values():
            if isinstance(value, torch.Tensor) and value.numel():
                storage = value.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


class Passes:
    """Every forward pass of a model: its rows, its new positions and the bytes its cache held going in."""

    def __init__(self, lm):
        self.lm, self.calls = lm, []

    def __enter__(self):
        def before(module, args, kwargs):
            inputs = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else kwargs["inputs_embeds"]
            past = kwargs.get("past_key_values")
            self.calls.append((inputs.shape[0], inputs.shape[1], held_bytes(past) if past is not None else 0))
        self.hook = self.lm.model.register_forward_pre_hook(before, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        self.hook.remove()


def per_position(lm) -> int:
    return lm.facts.kv_bytes_per_token


def plain_logprob(lm, prompt: list, path: list) -> float:
    """log m(path) from one forward pass over prompt + path, no cache."""
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([prompt + path])).logits[0].double()
    return sum(torch.log_softmax(logits[len(prompt) - 1 + i], -1)[t].item() for i, t in enumerate(path))


def test_samples_hold_the_prompt_once_not_once_per_sample():
    """64 samples of a 120-token prompt: every pass's cache holds the prompt once plus each sample's own tokens,
    where a copy per sample would hold 64 prompts; and each sample's probability is a plain pass's."""
    lm = tiny_llama(seed=2)
    settings = TreeSettings(depth=4)
    with Passes(lm) as seen:
        summary = draw_samples(lm, LONG, settings, n=64, seed=3)
    prompt_bytes = len(LONG) * per_position(lm)
    steps = [c for c in seen.calls if c[1] == 1]
    assert steps and all(rows <= 64 for rows, _, _ in steps)
    most = max(held for _, _, held in steps)
    assert most <= prompt_bytes + 64 * (settings.depth + 1) * per_position(lm)
    assert most < 8 * prompt_bytes                       # 64 copies would be 64 times it
    for o in summary.outcomes[:6]:
        want = plain_logprob(lm, LONG, list(o.token_ids))
        if o.complete:
            with torch.inference_mode():
                last = lm.model(input_ids=torch.tensor([LONG + list(o.token_ids)])).logits[0, -1].double()
            want += torch.log_softmax(last, -1)[0].item()
        else:
            with torch.inference_mode():
                last = lm.model(input_ids=torch.tensor([LONG + list(o.token_ids)])).logits[0, -1].double()
            want += math.log1p(-torch.softmax(last, -1)[0].item())
        assert o.logprob == pytest.approx(want, abs=1e-4)


def test_tree_rows_hold_the_prompt_once(tiny):
    """The tree's batches of 16 prefixes over a 120-token prompt: a pass's cache holds the prompt once and
    each row's own ancestors, and every node's mass is a plain pass's (Llama and GPT-2)."""
    with Passes(tiny) as seen:
        tree = grow_tree(tiny, LONG, TreeSettings(depth=4, budget=64, branch=4, batch=16))
    prompt_bytes = len(LONG) * per_position(tiny)
    batches = [c for c in seen.calls[1:]]
    assert max(rows for rows, _, _ in batches) == 16
    assert max(held for _, _, held in batches) <= prompt_bytes + 16 * 4 * per_position(tiny)
    for node in [n for n in tree.nodes if n.depth >= 2][::9]:
        path = [n.token_id for n in tree.path(node.id)]
        assert node.logprob == pytest.approx(plain_logprob(tiny, LONG, path), abs=1e-4)


def test_rows_run_in_parts_within_the_budget_and_give_the_same_numbers(monkeypatch):
    """With a budget of one row per pass (and the float64 work three rows at a time), the tree's passes take one
    row each, the samples' too, and both give what one batch gives: the tree its nodes and masses, the samples
    the very same draws for the seed."""
    lm = tiny_llama(seed=2)
    settings = TreeSettings(depth=3, budget=20, branch=3, batch=8)
    whole_tree = grow_tree(lm, LONG, settings)
    whole_samples = draw_samples(lm, LONG, settings, n=40, seed=5)
    import engine.decoding.shared_prefix as shared

    monkeypatch.setattr(shared, "PASS_BYTES", 1)
    monkeypatch.setattr(samples_module, "LOGPROB_ROWS", 3)
    monkeypatch.setattr(tree_module, "LOGPROB_ROWS", 3)
    with Passes(lm) as seen:
        tree = grow_tree(lm, LONG, settings)
        parted = draw_samples(lm, LONG, settings, n=40, seed=5)
    assert all(rows == 1 for rows, _, _ in seen.calls)
    assert [n.token_id for n in tree.nodes] == [n.token_id for n in whole_tree.nodes]
    for a, b in zip(tree.nodes, whole_tree.nodes):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-5)
        assert a.entropy == pytest.approx(b.entropy, abs=1e-5, nan_ok=True)
    assert [(o.token_ids, o.complete, o.count) for o in parted.outcomes] == \
        [(o.token_ids, o.complete, o.count) for o in whole_samples.outcomes]


def test_a_long_prompt_is_read_in_parts_with_progress_and_stop(monkeypatch):
    """A prompt longer than a part is read in parts: each a pass of at most that many tokens, each reported,
    the tree's masses still a plain pass's; a stop between parts ends with an empty tree said to be stopped."""
    lm = tiny_llama(seed=2)
    monkeypatch.setattr(prefill, "PREFILL_TOKENS", 32)
    lines = []
    with Passes(lm) as seen:
        tree = grow_tree(lm, LONG, TreeSettings(depth=3, budget=12, branch=3, batch=4),
                         progress=lambda fraction, line, snapshot: lines.append((line, snapshot().expansions)))
    assert [c[1] for c in seen.calls[:4]] == [32, 32, 32, 24]
    assert [line for line, _ in lines[:4]] == [f"reading the prompt: {n} of 120 tokens" for n in (32, 64, 96, 120)]
    for node in tree.nodes[1:]:
        path = [n.token_id for n in tree.path(node.id)]
        assert node.logprob == pytest.approx(plain_logprob(lm, LONG, path), abs=1e-4)
    asked = []
    stopped = grow_tree(lm, LONG, TreeSettings(depth=3, budget=12), should_stop=lambda: asked.append(1) or
                        len(asked) >= 2)
    assert stopped.stopped and stopped.expansions == 0 and stopped.ledger.total == pytest.approx(1)


def gemma3_mixed():
    """A tiny Gemma 3 with a sliding-window layer (16 positions) and a full-attention one, as the real one mixes."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from engine.model import LoadedModel
    from tiny_models import tiny_tokenizer

    tok = tiny_tokenizer()
    torch.manual_seed(1)
    config = Gemma3TextConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                              sliding_window=16, layer_types=["sliding_attention", "full_attention"],
                              eos_token_id=0, bos_token_id=0, pad_token_id=0)
    model = Gemma3ForCausalLM(config)
    with torch.no_grad():
        model.model.norm.weight.add_(6.0)
    return LoadedModel.from_parts(model, tok, "tiny-gemma3-mixed")


@pytest.mark.parametrize("build", [tiny_gemma3, gemma3_mixed], ids=["sliding", "sliding-and-full"])
def test_sliding_window_rows_past_the_window_are_a_plain_pass(build):
    """Gemma 3's sliding window (16 positions here) under a 40-token prompt: the tree (whole continuations over
    the shared window) and the samples give each path a plain pass's probability."""
    lm = build(seed=1) if build is tiny_gemma3 else build()
    prompt = LONG[:40]
    tree = grow_tree(lm, prompt, TreeSettings(depth=3, budget=12, branch=3, batch=4))
    for node in tree.nodes[1:]:
        path = [n.token_id for n in tree.path(node.id)]
        assert node.logprob == pytest.approx(plain_logprob(lm, prompt, path), abs=1e-4)
    summary = draw_samples(lm, prompt, TreeSettings(depth=3), n=12, seed=1)
    for o in summary.outcomes:
        if o.complete:
            with torch.inference_mode():
                last = lm.model(input_ids=torch.tensor([prompt + list(o.token_ids)])).logits[0, -1].double()
            want = plain_logprob(lm, prompt, list(o.token_ids)) + torch.log_softmax(last, -1)[0].item()
            assert o.logprob == pytest.approx(want, abs=1e-4)


def test_the_prompt_is_read_once_for_tree_landings_and_samples():
    """explore with greedy, beam 4 and samples: one pass over the prompt; every other pass feeds a few new
    positions; greedy's and beam search's answers are the ones their own decodes give, scored as plain passes."""
    lm = tiny_llama(seed=2)
    text = "the cat sat on the mat " * 8
    with Passes(lm) as seen:
        run = explore(lm, text, TreeSettings(depth=4, budget=24, branch=3), beams=(1, 4), samples=16, seed=2)
    prompt_len = len(run.tree.prompt_ids)
    assert sum(1 for _, new, _ in seen.calls if new >= prompt_len) == 1
    assert all(new <= 5 for _, new, _ in seen.calls[1:])
    for landing, config in zip(run.landings, [DecodeConfig(max_new_tokens=5),
                                              DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=5,
                                                           length_penalty=1.0)]):
        ids = decode(lm, text, config).best.token_ids
        complete = bool(ids) and ids[-1] in lm.eos_token_ids
        assert landing.token_ids == tuple(ids[:-1] if complete else ids[:4])
        if landing.complete:
            with torch.inference_mode():
                last = lm.model(input_ids=torch.tensor([list(run.tree.prompt_ids) + list(landing.token_ids)]))
            want = plain_logprob(lm, list(run.tree.prompt_ids), list(landing.token_ids))
            want += torch.log_softmax(last.logits[0, -1].double(), -1)[0].item()
            assert landing.logprob == pytest.approx(want, abs=1e-4)


def test_a_stop_after_the_tree_keeps_the_tree_and_the_landings_so_far():
    lm = tiny_llama(seed=2)
    lines, asked = [], []

    def progress(fraction, line, snapshot):
        lines.append(line)

    def should_stop():
        asked.append(1)
        return any(line.startswith("beam 4") for line in lines)

    run = explore(lm, "the cat sat", TreeSettings(depth=4, budget=8, branch=3), beams=(1, 4), samples=8,
                  should_stop=should_stop, progress=progress)
    assert run.tree.stopped and [x.strategy for x in run.landings] == ["greedy"] and run.samples is None
    assert "greedy: decoding (1 of 2)" in lines


def test_lanes_past_a_sliding_window_equal_each_lane_alone():
    """Compare's lanes on a Gemma 3 whose prompt outgrows its window: each lane is the lane decoded alone."""
    lm = gemma3_mixed()
    text = "the cat sat on the mat " * 6
    configs = [DecodeConfig(max_new_tokens=6), DecodeConfig(strategy="sample", seed=3, max_new_tokens=6)]
    for lane, config in zip(decode_lanes(lm, text, configs), configs):
        alone = decode(lm, text, config)
        assert len(alone.prompt_token_ids) > 16 and lane.best.token_ids == alone.best.token_ids
        for a, b in zip(lane.steps, alone.steps):
            assert a.candidates[0].prob == pytest.approx(b.candidates[0].prob, abs=1e-5)
            assert (a.kv.rows, a.kv.bytes) == (b.kv.rows, b.kv.bytes)


def test_lanes_hold_the_prompt_once():
    """Six lanes over a 120-token prompt: after the shared prefill, each pass's cache holds the prompt once,
    and each lane's trace still reports the cache a lane alone would hold."""
    lm = tiny_llama(seed=2)
    text = "the cat sat on the mat " * 12
    configs = [DecodeConfig(max_new_tokens=4), *[DecodeConfig(strategy="sample", seed=s, max_new_tokens=4)
                                                 for s in range(5)]]
    with Passes(lm) as seen:
        traces = decode_lanes(lm, text, configs)
    prompt_bytes = len(traces[0].prompt_token_ids) * per_position(lm)
    assert max(held for _, _, held in seen.calls[1:]) <= prompt_bytes + 6 * 4 * per_position(lm)
    alone = decode(lm, text, configs[0])
    assert [s.kv.bytes for s in traces[0].steps] == [s.kv.bytes for s in alone.steps]


def test_a_beam_search_started_from_the_prompts_pass_holds_it_once():
    """Beam search of 8 from a prompt's pass run once: its beams share the prompt (not 8 copies), and its answer
    and steps are those of the beam search that reads the prompt itself."""
    from engine.strategies import make_runner

    lm = tiny_llama(seed=2)
    text = "the cat sat on the mat " * 8
    config = DecodeConfig(strategy="beam", num_beams=8, max_new_tokens=5)
    runner = make_runner(lm, text, config)
    runner.start_from(PromptCache(lm, runner.prompt_ids))
    with Passes(lm) as seen:
        trace = runner.run()
    prompt_bytes = len(trace.prompt_token_ids) * per_position(lm)
    assert all(new == 1 for _, new, _ in seen.calls)
    assert max(held for _, _, held in seen.calls) <= prompt_bytes + 8 * 5 * per_position(lm)
    alone = decode(lm, text, config)
    assert trace.best.token_ids == alone.best.token_ids
    assert trace.best.cum_logprob == pytest.approx(alone.best.cum_logprob, abs=1e-4)
    assert [s.kv.rows for s in trace.steps] == [s.kv.rows for s in alone.steps]


def test_the_command_line_shows_progress_on_a_terminal_only(monkeypatch):
    """answers on a terminal: a progress line (the part of the run and how far) every PROGRESS_SECONDS on standard
    error; none into a file or a pipe."""
    import io

    import engine.cli.answers as cli

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(cli, "PROGRESS_SECONDS", 0.0)
    screen = Terminal()
    explore(tiny_llama(seed=2), "the cat sat", TreeSettings(depth=3, budget=8, branch=3, batch=4), beams=(1, 2),
            samples=4, progress=cli.terminal_progress(screen))
    lines = screen.getvalue().splitlines()
    assert "[100%] 8 of 8 prefixes expanded" in lines
    assert any(line.endswith("greedy: decoding (1 of 2)") for line in lines)
    assert any("4 samples: token 1 of 3" in line for line in lines)
    assert cli.terminal_progress(io.StringIO()) is None


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_a_decode_reads_a_long_prompt_in_parts_and_decodes_what_generate_does(monkeypatch, strategy):
    """A prompt longer than a part (32 tokens here) is read in passes of at most 32 tokens, and greedy's and beam
    search's tokens are generate's (which reads it in one pass)."""
    monkeypatch.setattr(prefill, "PREFILL_TOKENS", 32)
    lm = tiny_llama(seed=2)
    text = "the cat sat on the mat " * 8
    config = DecodeConfig(strategy=strategy, num_beams=3 if strategy == "beam" else 1, max_new_tokens=6,
                          length_penalty=1.0)
    with Passes(lm) as seen:
        trace = decode(lm, text, config)
    prompt = list(trace.prompt_token_ids)
    assert len(prompt) > 64 and max(new for _, new, _ in seen.calls) == 32
    out = lm.model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False, num_beams=config.num_beams,
                            length_penalty=1.0, pad_token_id=0, eos_token_id=list(lm.eos_token_ids) or None)
    assert trace.best.token_ids == out[0, len(prompt):].tolist()[:len(trace.best.token_ids)]


def test_a_first_step_too_big_to_keep_is_not_copied():
    """Step-by-step keeps first steps whose cache fits its budget; a bigger one is refused before its cache is
    copied (an 8,000-token prompt's copy was 370 MB on SmolLM2, made only to be dropped)."""
    from engine.decoding.stepper import _Openings
    from engine.strategies import make_runner

    lm = tiny_llama(seed=2)
    runner = make_runner(lm, "the cat sat on the mat", DecodeConfig(max_new_tokens=4))
    runner.step()
    copies = []
    real = runner.copy
    runner.copy = lambda: copies.append(1) or real()
    small = _Openings(max_bytes=runner.cache_bytes - 1)
    small.keep(lm, "the cat sat on the mat", runner.config, runner)
    assert copies == [] and small.start(lm, "the cat sat on the mat", runner.config) is None
    roomy = _Openings(max_bytes=runner.cache_bytes)
    roomy.keep(lm, "the cat sat on the mat", runner.config, runner)
    assert copies == [1] and roomy.start(lm, "the cat sat on the mat", runner.config) is not None


@pytest.mark.parametrize("strategy", ["greedy", "beam", "lanes"])
def test_a_watched_prompt_is_reported_part_by_part(monkeypatch, strategy):
    """Inside `watching_prompts`, a prompt longer than one part is reported before its first part and after each
    part (tokens read, prompt length), whichever decode reads it; a prompt of one part, or a read outside the
    block, is not. The counts are the prompt's own length cut at multiples of the part size."""
    monkeypatch.setattr(prefill, "PREFILL_TOKENS", 32)
    lm = tiny_llama(seed=2)
    text = "the cat sat on the mat " * 8
    length = len(lm.tokenizer(text)["input_ids"])
    assert length > 64 and length % 32
    config = DecodeConfig(strategy="beam" if strategy == "beam" else "greedy", max_new_tokens=2,
                          num_beams=2 if strategy == "beam" else 1)
    read = []

    def run(prompt):
        if strategy == "lanes":
            decode_lanes(lm, prompt, [config, DecodeConfig(strategy="sample", seed=3, max_new_tokens=2)])
        else:
            decode(lm, prompt, config)

    with prefill.watching_prompts(lambda done, total: read.append((done, total))):
        run(text)
        assert read == [(n, length) for n in [0, *range(32, length, 32), length]]
        read.clear()
        run("the cat sat")                        # one part: one pass, nothing to watch
    run(text)                                     # outside the block: nobody watches
    assert read == []


def test_the_innermost_watch_sees_the_prompt_and_the_outer_one_comes_back(monkeypatch):
    monkeypatch.setattr(prefill, "PREFILL_TOKENS", 32)
    lm = tiny_llama(seed=2)
    outer, inner = [], []
    with prefill.watching_prompts(lambda done, total: outer.append(done)):
        with prefill.watching_prompts(lambda done, total: inner.append(done)):
            decode(lm, "the cat sat on the mat " * 8, DecodeConfig(max_new_tokens=1))
        decode(lm, "the cat sat on the mat " * 7, DecodeConfig(max_new_tokens=1))
    assert inner[0] == 0 and inner[1:3] == [32, 64] and len(outer) == len(inner)
