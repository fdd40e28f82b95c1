"""The continuation tree against brute force: a tiny random model of 6 tokens, every sequence to the depth
enumerated with plain forward passes (no cache, no batching), probabilities computed here by hand."""
from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

from engine.answers import Distribution, TreeSettings, draw_samples, grow_tree
from engine.answers.meaning import count_entropy, normalise
from engine.answers.passes import PromptCache
from engine.errors import ConfigError
from tiny_models import tiny_llama

pytestmark = pytest.mark.tiny
VOCAB, END, PROMPT, DEPTH = 6, 0, [1, 2, 3], 3


@pytest.fixture(scope="module")
def small():
    return tiny_llama(seed=3, vocab_size=VOCAB)


def hand_logprobs(logits: torch.Tensor, dist: Distribution) -> torch.Tensor:
    """The next-token log-probabilities, computed here without transformers' processors."""
    x = logits.double()
    if dist.kind == "sampler":
        x = x / dist.temperature
        if dist.top_k:
            kth = torch.topk(x, dist.top_k).values[-1]
            x = torch.where(x < kth, torch.full_like(x, -math.inf), x)
        if dist.top_p < 1:
            p = torch.softmax(x, -1)
            order = torch.argsort(p, descending=True)
            before = torch.cumsum(p[order], 0) - p[order]         # mass of the more probable tokens
            cut = order[before >= dist.top_p]
            x[cut] = -math.inf
    return torch.log_softmax(x, -1)


_BRUTE: dict = {}


def brute_force(lm, dist: Distribution, depth: int) -> tuple:
    """({answer ids: log P}, {cut prefix of `depth` tokens: log mass}) over every sequence of tokens
    (worked out once per distribution and depth)."""
    if (dist, depth) not in _BRUTE:
        _BRUTE[dist, depth] = _enumerate(lm, dist, depth)
    return _BRUTE[dist, depth]


def _enumerate(lm, dist: Distribution, depth: int) -> tuple:
    answers, cut = {}, {}
    with torch.inference_mode():
        for n in range(depth + 1):
            for path in itertools.product(range(1, VOCAB), repeat=n):
                ids = PROMPT + list(path)
                logits = lm.model(input_ids=torch.tensor([ids])).logits[0].double()
                steps = [hand_logprobs(logits[len(PROMPT) - 1 + i], dist) for i in range(n + 1)]
                lp = sum(steps[i][t].item() for i, t in enumerate(path))
                if lp == -math.inf:
                    continue
                answers[path] = lp + steps[n][END].item()
                if n == depth:
                    cut[path] = lp + math.log1p(-math.exp(steps[n][END].item()))
    return answers, cut


DISTS = [Distribution(), Distribution("sampler", temperature=0.7), Distribution("sampler", top_k=3),
         Distribution("sampler", top_p=0.8, temperature=1.3)]


@pytest.mark.parametrize("dist", DISTS, ids=["model", "temperature", "top-k", "top-p"])
def test_whole_tree_equals_brute_force(small, dist):
    """With budget and branch enough to expand everything, the tree's answers are brute force's, exactly."""
    tree = grow_tree(small, PROMPT, TreeSettings(depth=DEPTH, budget=400, branch=VOCAB, batch=7, distribution=dist))
    answers, cut = brute_force(small, dist, DEPTH)
    found = {a.token_ids: a.logprob for a in tree.answers if a.prob > 0}
    assert set(found) == {k for k, v in answers.items() if v > -math.inf}
    for ids, lp in found.items():
        assert lp == pytest.approx(answers[ids], abs=1e-5)
    ledger = tree.ledger
    assert ledger.answers == pytest.approx(sum(math.exp(v) for v in answers.values()), rel=1e-5)
    assert ledger.cut_at_depth == pytest.approx(sum(math.exp(v) for v in cut.values()), rel=1e-5)
    assert ledger.left_out == pytest.approx(0, abs=1e-12) and ledger.open_prefixes == 0
    assert ledger.total == pytest.approx(1, abs=1e-9)


@pytest.mark.parametrize("dist", DISTS[:3:2], ids=["model", "top-k"])
@pytest.mark.parametrize("budget,branch", [(5, 2), (12, 3), (40, 4)])
def test_small_budget_ledger_and_certificate(small, dist, budget, branch):
    """A tree cut short: its answers are true answers, its four masses add to 1 and each equals brute
    force's sum over the outcomes it stands for, and every answer it certifies is where brute force ranks it."""
    tree = grow_tree(small, PROMPT, TreeSettings(depth=DEPTH, budget=budget, branch=branch, batch=3,
                                                 distribution=dist))
    answers, cut = brute_force(small, dist, DEPTH)
    assert tree.ledger.total == pytest.approx(1, abs=1e-9)
    found = {a.token_ids for a in tree.answers}
    for a in tree.answers:
        assert a.logprob == pytest.approx(answers[a.token_ids], abs=1e-5)
    assert tree.ledger.answers == pytest.approx(sum(math.exp(answers[k]) for k in found), rel=1e-5)
    # cut at the depth: the prefixes of `depth` tokens the tree expanded; the rest is open or left out
    expanded_at_depth = {tuple(n.token_id for n in tree.path(v.id)) for v in tree.nodes
                         if v.expanded and v.depth == DEPTH}
    assert tree.ledger.cut_at_depth == pytest.approx(sum(math.exp(cut[k]) for k in expanded_at_depth), rel=1e-5,
                                                     abs=1e-12)
    outside = (sum(math.exp(v) for k, v in answers.items() if k not in found)
               + sum(math.exp(v) for k, v in cut.items() if k not in expanded_at_depth))
    assert tree.ledger.left_out + tree.ledger.open_prefixes == pytest.approx(outside, rel=1e-5, abs=1e-12)
    truth = sorted(answers.values(), reverse=True)
    for k in range(1, len(tree.answers) + 1):
        if tree.certified(k):
            assert tree.answers[k - 1].logprob == pytest.approx(truth[k - 1], abs=1e-5)
    # the bound is a true bound: no answer the tree did not find is more probable
    assert all(math.exp(v) <= tree.ledger.bound * (1 + 1e-6) for k, v in answers.items() if k not in found)
    assert tree.certified_count >= 1 or budget < 40


def test_path_probability_is_generates_product(small):
    """Greedy's path in the tree has the log-probability that generate's raw logits give, token by token."""
    tree = grow_tree(small, PROMPT, TreeSettings(depth=4, budget=60, branch=VOCAB, batch=8))
    out = small.model.generate(torch.tensor([PROMPT]), max_new_tokens=4, do_sample=False, output_logits=True,
                               return_dict_in_generate=True, eos_token_id=None, pad_token_id=END)
    tokens = out.sequences[0, len(PROMPT):].tolist()
    steps = [torch.log_softmax(s[0].double(), -1) for s in out.logits]
    depth = next((i for i, t in enumerate(tokens) if t == END), len(tokens))
    expected = sum(steps[i][t].item() for i, t in enumerate(tokens[:depth]))
    node = 0
    for t in tokens[:depth]:
        node = next(n.id for n in tree.nodes if n.parent == node and n.token_id == t)
    assert tree.nodes[node].logprob == pytest.approx(expected, abs=1e-5)


def test_batched_passes_equal_one_pass_each(small):
    """Left-padded continuations of different lengths against the prompt's cache: each row's logits are a
    plain forward pass's over prompt + that continuation."""
    paths = [(4,), (1, 2, 5), (3, 3), (5, 1, 1, 2)]
    got = PromptCache(small, PROMPT).logits_after(paths)
    with torch.inference_mode():
        for row, path in enumerate(paths):
            want = small.model(input_ids=torch.tensor([PROMPT + list(path)])).logits[0, -1]
            assert torch.allclose(got[row], want, atol=1e-4)


def test_entropy_and_varentropy_by_hand():
    from engine.answers import entropy_and_varentropy

    h, v = entropy_and_varentropy(torch.tensor([[0.5, 0.5], [0.9, 0.1]]).log().double())
    bits = math.log(2)
    assert h[0].item() / bits == pytest.approx(1.0) and v[0].item() == pytest.approx(0, abs=1e-12)
    assert h[1].item() / bits == pytest.approx(0.469, abs=1e-3)
    assert v[1].item() / bits ** 2 == pytest.approx(0.904, abs=1e-3)


def test_group_entropy_by_counts():
    """Discrete semantic entropy: group ids [0, 1, 2, 1] -> 1.0397 nats."""
    assert count_entropy([0, 1, 2, 1]) == pytest.approx(1.0397, abs=1e-4)
    assert normalise("  Paris. ") == normalise("paris") and normalise("Paris") != normalise("Rome")


def test_samples_rescored_exactly_and_unsampled_mass(small):
    """Each sample's outcome has brute force's probability; the exact unsampled mass is 1 minus the distinct
    outcomes' sum; Good–Turing is n1 / N."""
    settings = TreeSettings(depth=DEPTH)
    summary = draw_samples(small, PROMPT, settings, n=40, seed=7)
    answers, cut = brute_force(small, Distribution(), DEPTH)
    assert sum(o.count for o in summary.outcomes) == 40
    for o in summary.outcomes:
        want = answers[o.token_ids] if o.complete else cut[o.token_ids]
        assert o.logprob == pytest.approx(want, abs=1e-5)
    assert summary.unsampled == pytest.approx(1 - sum(math.exp(o.logprob) for o in summary.outcomes), abs=1e-12)
    assert summary.good_turing == sum(1 for o in summary.outcomes if o.count == 1) / 40
    again = draw_samples(small, PROMPT, settings, n=40, seed=7)
    assert again == summary                       # seeded: the same draws


def test_samples_follow_the_distribution(small):
    """256 samples: the share landing on the most probable outcome is near its exact probability."""
    summary = draw_samples(small, PROMPT, TreeSettings(depth=1), n=256, seed=1)
    answers, cut = brute_force(small, Distribution(), 1)
    top = max([*answers.items(), *cut.items()], key=lambda kv: kv[1])
    p = math.exp(top[1])
    seen = sum(o.count for o in summary.outcomes if o.token_ids == top[0]
               and o.complete == (top[0] in answers and answers[top[0]] == top[1]))
    assert abs(seen / 256 - p) < 4 * math.sqrt(p * (1 - p) / 256) + 1e-9


@pytest.mark.parametrize("field,value", [("depth", 0), ("budget", 10**6), ("branch", "3"), ("batch", True)])
def test_settings_out_of_range_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        TreeSettings(**{field: value}).check()


def test_kept_rows_give_a_plain_forward_pass_on_both_architectures(tiny):
    """Every node's path mass, on Llama and GPT-2 (kept keys and values gathered per row, one new token a row),
    equals the sum over a plain forward pass of prompt + path; so does a tree grown without kept rows."""
    prompt = tiny.tokenizer("The capital of")["input_ids"]
    tree = grow_tree(tiny, prompt, TreeSettings(depth=4, budget=40, branch=3, batch=6))
    with torch.inference_mode():
        for node in [n for n in tree.nodes if n.depth >= 2][:: 7]:
            path = [n.token_id for n in tree.path(node.id)]
            logits = tiny.model(input_ids=torch.tensor([prompt + path])).logits[0].double()
            want = sum(torch.log_softmax(logits[len(prompt) - 1 + i], -1)[t].item() for i, t in enumerate(path))
            assert node.logprob == pytest.approx(want, abs=1e-4)


def test_each_step_records_the_varentropy_of_its_distribution(llama):
    """A decode's steps carry H and V of the model's distribution, as a plain forward pass gives them (worked out
    here in float64), and a trace read back keeps V (a trace without it reads as unknown, NaN)."""
    from engine import DecodeConfig, Trace, decode

    trace = decode(llama, "The capital of", DecodeConfig(max_new_tokens=3))
    ids = list(trace.prompt_token_ids)
    with torch.inference_mode():
        for step in trace.steps:
            p = torch.softmax(llama.model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
            h = -(p * p.log()).sum().item()
            v = (p * (p.log() + h) ** 2).sum().item()
            assert step.entropy == pytest.approx(h, abs=1e-4) and step.varentropy == pytest.approx(v, abs=1e-4)
            ids.append(step.chosen_ids[0])
    again = Trace.from_json(trace.to_json())
    assert [s.varentropy for s in again.steps] == pytest.approx([s.varentropy for s in trace.steps])
    data = json.loads(trace.to_json())
    for s in data["steps"]:
        del s["varentropy"]
    assert all(math.isnan(s.varentropy) for s in Trace.from_json(json.dumps(data)).steps)


def test_forks_count_the_groups_of_answers_below_each_node():
    """On a hand-built tree: the root sees two wordings, the branch whose answers differ only in case and
    closing punctuation sees one."""
    from types import SimpleNamespace

    from engine.answers.meaning import forks
    from engine.answers.tree import Answer, Prefix

    nodes = (Prefix(0, -1, -1, "", 0, 0.0, True), Prefix(1, 0, 5, "Paris", 1, -0.1, True),
             Prefix(2, 1, 6, ".", 2, -0.5, True), Prefix(3, 0, 7, "Rome", 1, -2.0, True))
    answers = (Answer(1, (5,), "Paris", -0.3), Answer(2, (5, 6), "paris.", -0.9), Answer(3, (7,), "Rome", -2.5))
    assert forks(SimpleNamespace(nodes=nodes, answers=answers)) == {0: 2, 1: 1, 2: 1, 3: 1}
