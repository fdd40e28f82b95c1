"""Agreement (MBR, self-consistency) against brute force on tiny random models of 6 tokens: every answer of at
most `depth` tokens enumerated with plain forward passes, its probability and its utility to each candidate
worked out here (utilities straight from sacrebleu and rapidfuzz, matches by hand), and against numbers
mbrs 0.1.8 recorded (tests/fixtures/mbrs/)."""
from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch

from engine.answers import Distribution, TreeSettings, draw_samples, grow_tree
from engine.answers.agreement import (UTILITIES, Evidence, Known, agree, expectation, expected, parse_utilities,
                                      utility, utility_matrix)
from engine.answers.meaning import normalise
from engine.answers.run import AnswersRun, _rank_sample
from engine.errors import ConfigError
from tiny_models import tiny_llama

pytestmark = pytest.mark.tiny
VOCAB, PROMPT, DEPTH = 6, [1, 2, 3], 3
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mbrs" / "expected_chrf.json"
# (seed, end token): answers spread thin over many texts, most mass past the depth; one answer holding most
MODELS = {"spread": (3, 0), "peaked": (2, 3), "bang": (5, 5)}
MODEL = Distribution()
_MODELS: dict = {}
_BRUTE: dict = {}


def model(name: str):
    if name not in _MODELS:
        seed, end = MODELS[name]
        _MODELS[name] = tiny_llama(seed=seed, vocab_size=VOCAB, eos_token_id=end)
    return _MODELS[name]


def brute_force(name: str, dist: Distribution = MODEL) -> tuple:
    """([(token ids, text, p)] for every answer of at most DEPTH tokens, the mass of longer ones), from plain
    float64 softmaxes of one forward pass per prefix, without the engine's processors (model distribution or
    top-k by hand)."""
    if (name, dist) in _BRUTE:
        return _BRUTE[name, dist]
    lm = model(name)
    ends = sorted({MODELS[name][1], 0})      # the tokenizer's own end-of-text ends an answer too
    answers, cut = [], 0.0
    with torch.inference_mode():
        for n in range(DEPTH + 1):
            for path in itertools.product([t for t in range(VOCAB) if t not in ends], repeat=n):
                logits = lm.model(input_ids=torch.tensor([PROMPT + list(path)])).logits[0].double()
                steps = []
                for i in range(n + 1):
                    x = logits[len(PROMPT) - 1 + i]
                    if dist.top_k:
                        x = torch.where(x < torch.topk(x, dist.top_k).values[-1], -math.inf, x)
                    steps.append(torch.softmax(x, -1))
                p = math.prod(steps[i][t].item() for i, t in enumerate(path))
                if p == 0:
                    continue
                text = lm.tokenizer.decode(list(path), skip_special_tokens=False) if path else ""
                end = steps[n][ends].sum().item()
                answers.append((tuple(path), text, p * end))
                if n == DEPTH:
                    cut += p * (1 - end)
    _BRUTE[name, dist] = answers, cut
    return answers, cut


def by_hand(name: str, h_ids, h_text, y_ids, y_text) -> float:
    """u(h, y) without the engine: matches by hand, chrF from sacrebleu's own sentence_score, edit similarity
    from rapidfuzz's pairwise function."""
    if name == "exact":
        return float(tuple(h_ids) == tuple(y_ids))
    if name == "text":
        return float(normalise(h_text) == normalise(y_text))
    if name == "chrf":
        from sacrebleu.metrics import CHRF

        return 1.0 if h_text == y_text else CHRF().sentence_score(h_text, [y_text]).score / 100
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.normalized_similarity(list(h_ids), list(y_ids))


def truth(name: str, utility_name: str, candidate, dist: Distribution = MODEL) -> tuple:
    """(B, slack): the candidate's expected utility over every answer of at most DEPTH tokens, and how much the
    answers past the depth can add (none under exact match: none of them has the candidate's token ids)."""
    answers, cut = brute_force(name, dist)
    total = math.fsum(p * by_hand(utility_name, candidate.token_ids, candidate.text, ids, text)
                      for ids, text, p in answers)
    return total, 0.0 if utility_name == "exact" else cut


def a_run(name: str, budget: int, branch: int = 3, samples: int = 0, seed: int = 0,
          dist: Distribution = MODEL) -> AnswersRun:
    lm = model(name)
    settings = TreeSettings(depth=DEPTH, budget=budget, branch=branch, batch=4, distribution=dist)
    tree = grow_tree(lm, PROMPT, settings)
    summary = draw_samples(lm, PROMPT, settings, samples, seed) if samples else None
    sampled = tuple(_rank_sample(tree, o) for o in summary.outcomes if o.complete) if summary else ()
    return AnswersRun("tiny", "prompt", False, tree, (), summary, sampled, seed)


# ---- the three special cases of MBR ------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("budget", [3, 12, 400])
def test_raw_exact_match_returns_the_mode(name, budget):
    """Exact match on token ids: E = p(h) exactly (a zero-width range), so the winner is the most probable
    answer known (the tree's top, or a sample more probable); when the tree's bound says no answer it did not
    find can beat it, it is brute force's most probable answer."""
    run = a_run(name, budget, samples=32)
    agreement = agree(run, ["exact"], k=12)
    r = agreement.results["exact"]
    won = agreement.candidates[r.winner]
    known = [(a.logprob, a.token_ids) for a in run.tree.answers]
    known += [(o.logprob, o.token_ids) for o in run.samples.outcomes if o.complete]
    assert won.token_ids == max(known)[1] and agreement.mode == r.winner
    for i, c in enumerate(agreement.candidates):
        assert r.lower[i] == r.upper[i] == pytest.approx(c.prob, rel=1e-12)
    answers, _ = brute_force(name)
    if agreement.mode_certified:
        assert won.token_ids == max(answers, key=lambda a: a[2])[0]
    assert budget < 400 or agreement.mode_certified


def test_a_mode_the_tree_cannot_vouch_for_is_not_certified():
    """One expansion: the empty answer is the only answer known, while brute force's mode is '!' (0.048 against
    0.047); the mode box must not call it certified."""
    agreement = agree(a_run("bang", 1), ["exact"], k=4)
    answers, _ = brute_force("bang")
    truth_mode = max(answers, key=lambda a: a[2])
    assert agreement.candidates[agreement.mode].token_ids != truth_mode[0] and truth_mode[1] == "!"
    assert not agreement.mode_certified


@pytest.mark.parametrize("name", MODELS)
def test_normalised_match_returns_the_heaviest_cluster(name):
    """Exact evidence from an exhaustive tree: the text winner belongs to the normalised group of largest
    exact mass (brute force's), is its most probable member, and its lower bound is that group's mass."""
    run = a_run(name, 400, branch=VOCAB)
    agreement = agree(run, ["text"], k=64)
    r = agreement.results["text"]
    answers, _ = brute_force(name)
    mass: dict = {}
    for _, text, p in answers:
        mass[normalise(text)] = mass.get(normalise(text), 0.0) + p
    heaviest = max(mass, key=mass.get)
    won = agreement.candidates[r.winner]
    assert normalise(won.text) == heaviest
    assert r.lower[r.winner] == pytest.approx(mass[heaviest], rel=1e-5)
    members = [c for c in agreement.candidates if normalise(c.text) == heaviest]
    assert won.prob == max(c.prob for c in members) and len(members) >= 2


@pytest.mark.parametrize("name", ["bang", "peaked"])
def test_sample_evidence_returns_the_majority(name):
    """Counted samples under normalised match: the winner's text is the one most samples share (counted here
    from the samples), and duplicates each weighted 1/N give the estimate distinct answers with count/N give."""
    run = a_run(name, 20, samples=256, seed=11)
    agreement = agree(run, ["text", "chrf"], k=64)
    r = agreement.results["text"]
    votes = Counter()
    duplicated = []
    for o in run.samples.outcomes:
        if o.complete:
            votes[normalise(o.text)] += o.count
            duplicated += [Known(o.token_ids, o.text, o.logprob)] * o.count
    top = max(votes.values())
    won = agreement.candidates[r.sample_winner]
    assert votes[normalise(won.text)] == top and agreement.majority.votes == top
    assert normalise(agreement.majority.answer.text) == normalise(won.text) or list(votes.values()).count(top) > 1
    assert r.estimate[r.sample_winner] == pytest.approx(top / 256, rel=1e-12)
    for name_u in ("text", "chrf"):
        matrix = utility_matrix(name_u, agreement.candidates, duplicated)
        flat = expected(matrix, [1 / 256] * len(duplicated))
        assert flat == pytest.approx(list(agreement.results[name_u].estimate), abs=1e-12)
    assert len(duplicated) > len(votes)        # there were duplicates to fold


# ---- the bounds, against brute force ---------------------------------------------------------------------
@pytest.mark.parametrize("name,dist", [("spread", Distribution()), ("peaked", Distribution()),
                                       ("bang", Distribution("sampler", top_k=3))], ids=["spread", "peaked", "top-k"])
@pytest.mark.parametrize("budget", [1, 5, 12, 40])
def test_brute_force_lies_within_the_bounds_and_certificates_hold(name, dist, budget):
    """For every candidate and utility, brute force's expected utility (whatever the answers past the depth
    are) lies in [lower, upper]; a certified winner beats every rival under brute force, the unknown counted
    against it; the estimate and the weighted estimate lie in [0, 1]."""
    run = a_run(name, budget, samples=24, seed=budget, dist=dist)
    agreement = agree(run, UTILITIES, k=10)
    certified = 0
    for u, r in agreement.results.items():
        bounds = [truth(name, u, c, dist) for c in agreement.candidates]
        for i, (b, slack) in enumerate(bounds):
            assert r.lower[i] <= b + 1e-6 and b + slack <= r.upper[i] + 1e-6, (u, i)
            assert 0 <= r.estimate[i] <= 1 and (r.weighted is None or 0 <= r.weighted[i] <= 1)
        if r.certified:
            certified += 1
            won = agreement.candidates[r.winner]
            for i, c in enumerate(agreement.candidates):
                if by_hand(u, won.token_ids, won.text, c.token_ids, c.text) < 1:     # a rival, not a twin
                    assert bounds[r.winner][0] > bounds[i][0] + bounds[i][1] - 1e-6, (u, i)
    assert certified >= 1


@pytest.mark.parametrize("name", MODELS)
def test_an_exhaustive_tree_gives_brute_force_values(name):
    """Every answer found: the columns are brute force's answers and the mass not found is the mass past the
    depth; the lower bound is brute force's value (to float32's passes), and brute force's own distribution put
    through the same computation gives it to 1e-9."""
    run = a_run(name, 400, branch=VOCAB)
    agreement = agree(run, UTILITIES, k=20)
    answers, cut = brute_force(name)
    assert {a.token_ids for a in agreement.evidence.answers} == {ids for ids, _, _ in answers}
    assert agreement.evidence.rest == pytest.approx(cut, abs=1e-6)
    exact_evidence = Evidence(tuple(Known(ids, text, math.log(p)) for ids, text, p in answers), cut)
    for u, r in agreement.results.items():
        again = expectation(u, list(agreement.candidates), exact_evidence)
        for i, c in enumerate(agreement.candidates):
            b, slack = truth(name, u, c)
            assert r.lower[i] == pytest.approx(b, abs=1e-6)
            assert again.lower[i] == pytest.approx(b, abs=1e-9)
            assert again.upper[i] == pytest.approx(b + (0 if u == "exact" else cut), abs=1e-9)


def test_sample_estimates_lie_within_four_standard_errors():
    """256 seeded samples: each candidate's counted estimate is within 4 standard errors of brute force's sum
    over the answers of at most DEPTH tokens (a sample that does not end agrees with nothing). Where fewer than
    10 samples agree with a candidate at all, the standard error is itself too rough to test against."""
    run = a_run("bang", 30, samples=256, seed=5)
    agreement = agree(run, UTILITIES, k=24)
    counts = [a.count for a in agreement.evidence.answers]
    checked = 0
    for u, r in agreement.results.items():
        for i, c in enumerate(agreement.candidates):
            b, _ = truth("bang", u, c)
            if sum(n for n, x in zip(counts, r.matrix[i]) if x > 0) >= 10:
                assert abs(r.estimate[i] - b) <= 4 * r.stderr[i], (u, c.text)
                checked += 1
    assert checked >= 20


# ---- the utilities -----------------------------------------------------------------------------------------
def hyp(ids, text) -> Known:
    """An answer as a hypothesis: its probability plays no part in u."""
    return Known(tuple(ids), text, 0.0)


SAMPLES = [hyp((), ""), hyp((7,), " "), hyp((3,), "!"), hyp((4, 5), "Paris."), hyp((6,), "paris"),
           hyp((8, 9, 4), "The capital is Paris"), hyp((10,), "巴黎"), hyp((11, 10), "法国的首都是巴黎。"),
           hyp((12,), "London"), hyp((13, 3), "Paris!")]


@pytest.mark.parametrize("name", UTILITIES)
def test_utility_axioms_the_empty_answer_included(name):
    """u(h, h) = 1 for every answer, the empty one and a blank one included; every value in [0, 1]; exact, text
    and edit are symmetric; the matrix is the pairs one by one."""
    matrix = utility_matrix(name, SAMPLES, SAMPLES)
    for i, h in enumerate(SAMPLES):
        assert matrix[i][i] == 1.0 == utility(name, h, h)
        for j, y in enumerate(SAMPLES):
            assert 0.0 <= matrix[i][j] <= 1.0
            assert matrix[i][j] == pytest.approx(by_hand(name, h.token_ids, h.text, y.token_ids, y.text), abs=1e-12)
            if name != "chrf":
                assert matrix[i][j] == matrix[j][i]
    assert utility(name, SAMPLES[0], SAMPLES[2]) == (1.0 if name == "text" else 0.0)      # "" and "!" group


def test_chrf_reads_the_hypothesis_first():
    """β = 2 weights recall: a long hypothesis containing a short reference scores 54.42, reversed 22.99
    (sacrebleu 2.6.0's numbers for this pair)."""
    long, short = hyp((1, 2, 3), "The capital is Paris"), hyp((3,), "Paris")
    assert utility("chrf", long, short) == pytest.approx(0.5442, abs=1e-4)
    assert utility("chrf", short, long) == pytest.approx(0.2299, abs=1e-4)


def test_parse_utilities_names_what_is_wrong():
    assert parse_utilities("chrf, text,chrf") == ("chrf", "text")
    for bad, words in [("bleu", "'bleu' is not one of"), ("", "give one or more"), (",", "give one or more")]:
        with pytest.raises(ConfigError, match=words):
            parse_utilities(bad)
    with pytest.raises(ConfigError, match="mbr-candidates"):
        agree(a_run("peaked", 3), k=0)


# ---- parity with mbrs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def recorded():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_expected_chrf_equals_mbrs(recorded):
    """mbrs 0.1.8's MetricChrF.expected_scores on recorded hypotheses and references: the plain mean over the
    references (duplicates count), and with reference_lprobs the softmax-weighted sum; ours ×100, to float32's
    precision; its pairwise matrix is ours too, and DecoderMBR picks what we pick."""
    hyps = [hyp((i,), text) for i, text in enumerate(recorded["hypotheses"])]
    refs = [hyp((100 + i,), text) for i, text in enumerate(recorded["references"])]
    matrix = utility_matrix("chrf", hyps, refs)
    assert [[100 * u for u in row] for row in matrix] == [pytest.approx(row, abs=2e-4) for row in recorded["pairwise"]]
    mean = expected(matrix, [1 / len(refs)] * len(refs))
    assert [100 * x for x in mean] == pytest.approx(recorded["expected_mean"], abs=2e-4)
    lprobs = recorded["reference_lprobs"]
    top = max(lprobs)
    weights = [math.exp(lp - top) for lp in lprobs]
    weights = [w / sum(weights) for w in weights]
    ours = expected(matrix, weights)
    assert [100 * x for x in ours] == pytest.approx(recorded["expected_weighted"], abs=2e-4)
    assert max(range(len(hyps)), key=lambda i: mean[i]) == recorded["mbr_idx_mean"]
    assert max(range(len(hyps)), key=lambda i: ours[i]) == recorded["mbr_idx_weighted"]


def test_counts_equal_the_references_repeated(recorded):
    """mbrs counts a repeated reference once per copy: our distinct references weighted count/N give its mean."""
    hyps = [hyp((i,), text) for i, text in enumerate(recorded["hypotheses"])]
    counts = Counter(recorded["references"])
    distinct = list(counts)
    n = len(recorded["references"])
    matrix = utility_matrix("chrf", hyps, [hyp((i,), text) for i, text in enumerate(distinct)])
    folded = expected(matrix, [counts[text] / n for text in distinct])
    assert [100 * x for x in folded] == pytest.approx(recorded["expected_mean"], abs=2e-4)
    assert len(distinct) < n


def _example(rows, rest):
    answers = [Known((i + 1,) if text else (), text, math.log(p)) for i, (text, p) in enumerate(rows)]
    return answers, Evidence(tuple(answers), rest)


def test_the_worked_examples_of_the_reference_notes():
    """Example A (rest .15): the mode is London; normalised match picks the Paris group, certified (.500 against
    London's .450); chrF picks 'Paris.' at .432, not certified. Example B (rest .20): the mode is the empty
    answer; normalised match picks Paris, not certified against the empty answer; chrF's recall weighting picks
    the longer 'It is Paris.' (.417) over 'Paris.' (.410). Numbers from sacrebleu 2.6.0, worked out by hand."""
    a, evidence = _example([("London", .30), ("Paris", .25), ("Paris.", .15), ("paris", .10), ("Lyon", .05)], .15)
    assert expectation("exact", a, evidence).winner == 0
    text = expectation("text", a, evidence)
    assert list(text.lower) == pytest.approx([.30, .50, .50, .50, .05]) and text.winner == 1 and text.certified
    assert text.margin == pytest.approx(.05)
    chrf = expectation("chrf", a, evidence)
    assert list(chrf.lower) == pytest.approx([.312, .417, .432, .302, .106], abs=1e-3)
    assert chrf.winner == 2 and not chrf.certified
    b, evidence = _example([("", .20), ("Paris", .18), ("Paris.", .17), ("It is Paris.", .15), ("Lyon", .10)], .20)
    assert expectation("exact", b, evidence).winner == 0
    text = expectation("text", b, evidence)
    assert text.winner == 1 and (text.lower[1], text.upper[1]) == pytest.approx((.35, .55)) and not text.certified
    chrf = expectation("chrf", b, evidence)
    assert chrf.winner == 3 and chrf.lower[3] == pytest.approx(.417, abs=1e-3)
    assert chrf.lower[2] == pytest.approx(.410, abs=1e-3)
