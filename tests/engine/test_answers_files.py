"""Every Whole answers run the app or the CLI writes opens again, on the tiny Llama: with samples and without,
beams and none, stopped or not, under the model's distribution and under samplers that give answers
probability 0; any seed a run takes; and a tree at the CLI's maxima within the reader's 20 MB."""
from __future__ import annotations

import itertools
import json
import math

import pytest

from engine.answers import Distribution, TreeSettings
from engine.answers.record import MAX_NODES, from_json, to_checked_json, to_json
from engine.answers.run import explore
from engine.answers.tree import Answer, AnswerTree, Prefix
from engine.errors import ConfigError
from engine.trace import MAX_TRACE_BYTES
from tiny_models import tiny_llama

pytestmark = pytest.mark.tiny
PROMPT = "The capital of"
DISTS = {"model": Distribution(), "top-k 1": Distribution("sampler", top_k=1),
         "top-p 0.3": Distribution("sampler", top_p=0.3)}


@pytest.fixture(scope="module")
def lm():
    return tiny_llama()


def same_run(read, run) -> None:
    """The run read back is the run written: every number the page shows from it."""
    assert (read.model, read.prompt, read.chat, read.seed) == (run.model, run.prompt, run.chat, run.seed)
    t, r = read.tree, run.tree
    assert (t.stopped, t.expansions, t.settings) == (r.stopped, r.expansions, r.settings)
    assert [(a.token_ids, a.logprob, a.text) for a in t.answers] == [(a.token_ids, a.logprob, a.text)
                                                                     for a in r.answers]
    for field in ("answers", "open_prefixes", "cut_at_depth", "left_out", "bound"):
        assert getattr(t.ledger, field) == pytest.approx(getattr(r.ledger, field), rel=1e-12, abs=1e-15)
    assert t.certified_count == r.certified_count
    assert read.landings == run.landings
    assert read.sample_landings == run.sample_landings
    assert (read.samples is None) == (run.samples is None)
    if run.samples is not None:
        assert read.samples.outcomes == run.samples.outcomes
        assert (read.samples.samples, read.samples.seed) == (run.samples.samples, run.samples.seed)


@pytest.mark.parametrize("dist", DISTS, ids=list(DISTS))
@pytest.mark.parametrize("samples,beams", list(itertools.product((0, 5), ((1,), (1, 2, 4)))),
                         ids=["no samples, greedy", "no samples, beams", "samples, greedy", "samples, beams"])
def test_each_run_written_reads_back_whole(lm, dist, samples, beams):
    run = explore(lm, PROMPT, TreeSettings(depth=3, budget=20, branch=3, batch=4, distribution=DISTS[dist]),
                  beams=beams, samples=samples, seed=7)
    assert (run.samples is None) == (samples == 0) and len(run.landings) == len(beams)
    same_run(from_json(to_json(run)), run)
    same_run(from_json(to_checked_json(run).encode("utf-8")), run)


@pytest.mark.parametrize("dist", DISTS, ids=list(DISTS))
def test_a_stopped_run_reads_back_whole(lm, dist):
    """Stop after two passes (the prompt's, then its children): no landings, no samples, the tree so far."""
    asked = []

    def second_time() -> bool:
        asked.append(1)
        return len(asked) == 2

    run = explore(lm, PROMPT, TreeSettings(depth=3, budget=20, branch=3, batch=4, distribution=DISTS[dist]),
                  beams=(1, 4), samples=5, should_stop=second_time)
    assert run.tree.stopped and run.tree.passes == 2 and run.samples is None and not run.landings
    assert any(not n.expanded for n in run.tree.nodes)
    same_run(from_json(to_json(run)), run)


def test_an_answer_of_probability_zero_under_the_sampler_is_written_and_read_as_zero(lm):
    """Under top-k 1 only greedy's tokens have probability above 0: a beam that ends elsewhere lands on an
    answer of probability 0, written as null (JSON has no -inf) and read back as log p = -inf."""
    run = explore(lm, PROMPT, TreeSettings(depth=3, budget=20, branch=3, distribution=DISTS["top-k 1"]),
                  beams=(1, 2, 4))
    greedy = run.landings[0]
    elsewhere = [x for x in run.landings if x.token_ids != greedy.token_ids]
    assert elsewhere, "every beam ended on greedy's answer: the case is not exercised"
    data = json.loads(to_json(run))
    assert [row[4] for row in data["landings"] if tuple(row[1]) != greedy.token_ids] == [None] * len(elsewhere)
    read = from_json(json.dumps(data))
    assert all(x.logprob == -math.inf for x in read.landings if x.token_ids != greedy.token_ids)


@pytest.mark.parametrize("seed", [0, 2**31, 2**63 - 1])
def test_any_seed_a_run_takes_reads_back(lm, seed):
    run = explore(lm, PROMPT, TreeSettings(depth=2, budget=8, branch=2), samples=3, seed=seed)
    read = from_json(to_json(run))
    assert read.seed == seed and read.samples.seed == seed


@pytest.mark.parametrize("seed", [2**63, 2**64, -1, -2**63 - 1])
def test_a_seed_past_the_range_is_refused_before_the_run(lm, seed):
    with pytest.raises(ConfigError) as info:
        explore(lm, PROMPT, TreeSettings(depth=2, budget=8, branch=2), samples=3, seed=seed)
    assert "\n" not in str(info.value) and str(info.value).startswith("seed: must be a whole number from 0 to 2**63")


def maximal_tree(text_chars: int) -> AnswerTree:
    """A consistent tree at the CLI's maxima, built without a model: 5,000 prefixes expanded best-first, 64
    children each (320,001 nodes), every token text `text_chars` characters, one of them Chinese (3 bytes)."""
    budget, branch, end, kept = 5000, 64, 0.01, 0.9
    nodes = [Prefix(0, -1, -1, "", 0, 0.0)]
    answers = []
    frontier = [0]
    for expanded in range(budget):
        node = nodes[frontier[expanded]]
        mass = node.mass
        for j in range(branch):
            text = f"{j:0{text_chars - 1}d}词"
            nodes.append(Prefix(len(nodes), node.id, 1000 + j, text, node.depth + 1,
                                node.logprob + math.log(kept / branch)))
            frontier.append(len(nodes) - 1)
        left = mass * (1 - end - kept)
        nodes[node.id] = Prefix(node.id, node.parent, node.token_id, node.text, node.depth, node.logprob, True, end,
                                left, 0.0, left / 1000, 1.5, 0.7)
        path = tuple(n.token_id for n in _path(nodes, node.id))
        answers.append(Answer(node.id, path, "".join(n.text for n in _path(nodes, node.id)),
                              node.logprob + math.log(end)))
    settings = TreeSettings(depth=64, budget=budget, branch=branch, batch=64)
    return AnswerTree((1, 2, 3), settings, tuple(nodes), tuple(sorted(answers, key=lambda a: -a.logprob)), budget,
                      budget // 64 + 1, 1.0)


def _path(nodes, node_id):
    out = []
    while node_id > 0:
        out.append(nodes[node_id])
        node_id = nodes[node_id].parent
    return out[::-1]


def test_a_tree_at_the_clis_maxima_is_written_within_the_readers_limit():
    """320,001 nodes whose token texts are 8 characters (10 bytes; the tokens a tree keeps are mostly
    shorter) take about 17 MB as written, and read back with the same ledger."""
    from engine.answers.run import AnswersRun

    tree = maximal_tree(8)
    assert len(tree.nodes) == MAX_NODES and tree.ledger.total == pytest.approx(1, abs=1e-9)
    run = AnswersRun("tiny", PROMPT, False, tree)
    text = to_json(run)
    assert len(text.encode("utf-8")) < MAX_TRACE_BYTES
    read = from_json(text)
    assert read.tree.ledger.answers == pytest.approx(tree.ledger.answers, rel=1e-12)
    assert len(read.tree.nodes) == MAX_NODES and read.tree.certified_count == tree.certified_count


def test_a_run_that_would_not_open_again_is_refused_before_it_is_written(lm):
    """A model whose token text is longer than a file holds: the CLI's writer says so in one line."""
    from dataclasses import replace

    run = explore(lm, PROMPT, TreeSettings(depth=2, budget=8, branch=2))
    nodes = list(run.tree.nodes)
    nodes[1] = replace(nodes[1], text="x" * 1001)
    run = replace(run, tree=replace(run.tree, nodes=tuple(nodes)))
    with pytest.raises(ConfigError) as info:
        to_checked_json(run, "--json")
    message = str(info.value)
    assert message.startswith("--json: not written, it would not open again") and "1,001 characters" in message
    assert "\n" not in message
