"""Agreement: the answer the samples agree on, beside the most likely one (minimum Bayes risk decoding).

MBR picks, among candidate answers h, the one of highest expected utility E[u(h, Y)] = Σ_y p(y) u(h, y).
With u = exact match on token ids that expectation is p(h) and the winner is the mode (MAP); with u = match
of normalised text it is the heaviest group of answers; over N samples weighted 1/N each it is the majority
vote (self-consistency). One rule, several answers, and the page shows where they part.

Evidence about Y, three kinds:
  - exact: every complete answer whose exact p is known (the tree's, greedy's, the beams', the samples'),
    and the mass of every other outcome, not found. For any u in [0, 1] the true expectation lies in
    [Σ_found p·u, that + the mass not found]; when the winner's lower bound beats every rival's upper bound
    it is certified the best of the candidates, whatever the answers not found are;
  - samples counted: each distinct sample weighted count / N (self-consistency; mbrs without
    log-probabilities): an estimate with its standard error. A sample that did not end within the depth
    agrees with nothing (u = 0): the estimate is of the same sum the exact lower bound is a part of;
  - samples weighted: the distinct complete samples with their exact p renormalised (model-based MBR;
    mbrs with `reference_lprobs`).

Utilities, each in [0, 1] with u(h, h) = 1, the empty answer included:
  - exact: the same token ids;
  - text: the same text after `meaning.normalise` (case, spaces, closing punctuation);
  - chrf: sacrebleu's chrF (character 6-grams, β = 2), hypothesis first as mbrs calls it, divided by 100;
    identical texts score 1 (sacrebleu gives chrF("", "") = 0);
  - edit: 1 − Levenshtein distance / the longer length, on token ids (rapidfuzz).

Pure: no model once the run exists, so a saved run reopens with every number here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import zip_longest

from ..config import DEFAULT_MBR_CANDIDATES as DEFAULT_CANDIDATES, MAX_MBR_CANDIDATES as MAX_CANDIDATES
from ..config import MBR_UTILITIES as UTILITIES
from ..errors import ConfigError
from .meaning import entropy_of, normalise

MAX_EVIDENCE = 256        # columns the tree's further answers fill (candidates and samples are always columns)


@dataclass(frozen=True)
class AgreementSettings:
    """What to compute: the utilities, and at most how many candidates (a run file carries these)."""
    utilities: tuple = UTILITIES
    limit: int = DEFAULT_CANDIDATES

    def check(self) -> "AgreementSettings":
        parse_utilities(",".join(map(str, self.utilities)))
        check_limit(self.limit)
        return self


@dataclass(frozen=True)
class Known:
    """A complete answer whose exact probability is known, and who brought it."""
    token_ids: tuple
    text: str
    logprob: float
    sources: tuple = ()       # "tree", "greedy", "beam 4", "sample"
    count: int = 0            # times sampled

    @property
    def prob(self) -> float:
        return math.exp(self.logprob)


@dataclass(frozen=True)
class Evidence:
    """The columns: answers with exact p (and sample counts), and the mass of everything else."""
    answers: tuple            # Known
    rest: float               # exact mass of every outcome not among the columns
    samples: int = 0          # N drawn (0: none)
    unended: int = 0          # of them, how many did not end within the depth

    @property
    def found(self) -> float:
        return sum(a.prob for a in self.answers)


@dataclass(frozen=True)
class Expectation:
    """One utility's expected utilities, per candidate, from each kind of evidence, and its winner."""
    utility: str
    matrix: tuple             # [candidate][column] u(candidate, column)
    lower: tuple              # exact evidence: Σ_found p·u
    upper: tuple              # + the mass not found (nothing for exact match: no answer not found is a candidate)
    estimate: tuple | None    # samples counted: the mean of u over the N samples
    stderr: tuple | None      # its standard error (nan for N = 1)
    weighted: tuple | None    # samples weighted by their exact p, renormalised
    winner: int               # by the lower bound, then p, then token ids
    certified: bool           # its lower bound beats the upper bound of every candidate that differs under u
    margin: float             # that lower bound minus the largest such upper bound
    sample_winner: int | None  # by the estimate, then p, then token ids (None: no sample ended)


@dataclass(frozen=True)
class Cluster:
    """Answers with one normalised text: grouped by text, not by meaning."""
    key: str
    members: tuple            # Known, most probable first
    mass: float               # exact, of the members found
    votes: int                # samples that landed in it


@dataclass(frozen=True)
class Majority:
    key: str                  # the normalised text most samples share
    votes: int
    of: int                   # N
    answer: Known             # its most sampled member


@dataclass(frozen=True)
class Agreement:
    candidates: tuple         # Known, most probable first
    ranks: tuple              # each candidate's rank among the tree's answers
    sure: tuple               # whether that rank is the model's own (no answer not found can beat it)
    evidence: Evidence
    results: dict             # utility name -> Expectation
    clusters: tuple           # Cluster, heaviest first
    cluster_entropy: float    # nats, over the clusters' exact masses renormalised
    vote_entropy: float       # nats, over the clusters' sample counts (nan without samples)
    mode: int | None          # the most probable answer known (the tree's top, or a sample that beat it)
    mode_certified: bool      # no answer the tree did not find can be more probable (the tree's bound)
    majority: Majority | None
    limit: int = DEFAULT_CANDIDATES
    utilities: tuple = UTILITIES


# ---- utilities -------------------------------------------------------------------------------------------
def parse_utilities(text) -> tuple:
    """'text,chrf' -> ('text', 'chrf'): names from UTILITIES, each once, in the order given."""
    names = [w.strip() for w in str(text).split(",") if w.strip()]
    wrong = [w for w in names if w not in UTILITIES]
    if not names or wrong:
        shown = f"'{str(wrong[0])[:40]}' is not one of" if wrong else "give one or more of"
        raise ConfigError("mbr", f"mbr: {shown} {', '.join(UTILITIES)} (comma-separated, like text,chrf)")
    return tuple(dict.fromkeys(names))


def check_limit(k) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_CANDIDATES:
        raise ConfigError("mbr_candidates", f"mbr-candidates: must be a whole number from 1 to {MAX_CANDIDATES}, "
                                            f"got {str(k)[:40]}")
    return k


class _ChrF:
    """sacrebleu's sentence chrF with each text's character n-grams extracted once (a matrix reuses every text
    along a row and down a column); the score is sacrebleu's own arithmetic on the same counts."""

    def __init__(self):
        from sacrebleu.metrics import CHRF

        self.scorer = CHRF()
        self._grams: dict = {}

    def grams(self, text: str) -> list:
        got = self._grams.get(text)
        if got is None:
            from sacrebleu.metrics.helpers import extract_all_char_ngrams

            got = self._grams[text] = extract_all_char_ngrams(text, self.scorer.char_order, self.scorer.whitespace)
        return got

    def __call__(self, hypothesis: str, reference: str) -> float:
        if hypothesis == reference:
            return 1.0
        stats: list = []
        for h, r in zip(self.grams(hypothesis), self.grams(reference)):
            stats.extend(self.scorer._get_match_statistics(h, r))
        return min(max(self.scorer._compute_f_score(stats) / 100.0, 0.0), 1.0)


def key_of(utility: str, answer) -> object:
    """What u compares: two answers with one key score 1 against each other and alike against every other."""
    if utility == "text":
        return normalise(answer.text)
    if utility == "chrf":
        return answer.text
    return tuple(answer.token_ids)


def utility_matrix(utility: str, hypotheses, references) -> list:
    """[len(hypotheses)][len(references)] u(h, y), for anything with `.token_ids` and `.text`."""
    if utility not in UTILITIES:
        raise ConfigError("mbr", f"mbr: '{str(utility)[:40]}' is not one of {', '.join(UTILITIES)}")
    if not hypotheses or not references:
        return [[] for _ in hypotheses]
    if utility in ("exact", "text"):
        keys = [key_of(utility, y) for y in references]
        rows = [key_of(utility, h) for h in hypotheses]
        return [[1.0 if k == own else 0.0 for k in keys] for own in rows]
    if utility == "chrf":
        chrf = _ChrF()
        return [[chrf(h.text, y.text) for y in references] for h in hypotheses]
    import numpy as np
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    scores = cdist([list(h.token_ids) for h in hypotheses], [list(y.token_ids) for y in references],
                   scorer=Levenshtein.normalized_similarity, dtype=np.float64)
    return np.clip(scores, 0.0, 1.0).tolist()


def utility(name: str, hypothesis, reference) -> float:
    """u(hypothesis, reference) for one pair."""
    return utility_matrix(name, [hypothesis], [reference])[0][0]


def expected(matrix, weights) -> list:
    """Σ_j w_j u_ij per row: the expected utility of each hypothesis under weighted references."""
    return [math.fsum(w * u for w, u in zip(weights, row)) for row in matrix]


# ---- from a run ------------------------------------------------------------------------------------------
def known_answers(run) -> dict:
    """token ids -> Known: every complete answer whose exact p the run knows, once (the tree's number when the
    tree holds it; one answer scored twice, by a batched pass and a plain one, differs only in rounding)."""
    out: dict = {}

    def add(ids, text, logprob, source, count=0):
        ids = tuple(ids)
        had = out.get(ids)
        if had is None:
            out[ids] = Known(ids, text, logprob, (source,), count)
        else:
            sources = had.sources if source in had.sources else had.sources + (source,)
            out[ids] = Known(ids, had.text, had.logprob, sources, had.count + count)

    for a in run.tree.answers:
        add(a.token_ids, a.text, a.logprob, "tree")
    for x in run.landings:
        if x.complete:
            add(x.token_ids, x.text, x.logprob, x.strategy)
    if run.samples is not None:
        for o in run.samples.outcomes:
            if o.complete:
                add(o.token_ids, o.text, o.logprob, "sample", o.count)
    return out


def choose_candidates(run, known: dict, k: int) -> list:
    """At most k hypotheses: the most probable answer known and the most sampled one, greedy's and each
    beam's, then the tree's next answers and the next most sampled in turn. Most probable first."""
    picked: dict = {}

    def take(ids) -> None:
        if ids is not None and ids in known and ids not in picked and len(picked) < k:
            picked[ids] = known[ids]

    tree_order = [a.token_ids for a in run.tree.answers]
    sampled = sorted((o for o in (run.samples.outcomes if run.samples is not None else ()) if o.complete),
                     key=lambda o: (-o.count, -o.logprob, o.token_ids))
    sample_order = [o.token_ids for o in sampled]
    take(min(known, key=lambda ids: _order(known[ids])) if known else None)
    take(sample_order[0] if sample_order else None)
    for x in run.landings:
        if x.complete:
            take(tuple(x.token_ids))
    for a, b in zip_longest(tree_order, sample_order):
        if len(picked) >= k:
            break
        take(a)
        take(b)
    return sorted(picked.values(), key=_order)


def _order(a: Known):
    return (-a.logprob, a.token_ids)


def gather_evidence(run, known: dict, candidates: list) -> Evidence:
    """The candidates, every distinct complete sample, then the tree's answers by probability up to
    MAX_EVIDENCE columns; the exact mass of all else is `rest` (answers beyond the cap included: the bounds
    stay true, only wider)."""
    columns = {a.token_ids: a for a in candidates}
    for a in sorted((a for a in known.values() if a.count), key=_order):
        columns.setdefault(a.token_ids, a)
    for a in sorted(known.values(), key=_order):
        if len(columns) >= MAX_EVIDENCE:
            break
        columns.setdefault(a.token_ids, a)
    answers = tuple(sorted(columns.values(), key=_order))
    rest = max(0.0, 1.0 - math.fsum(a.prob for a in answers))
    s = run.samples
    n = s.samples if s is not None else 0
    unended = sum(o.count for o in s.outcomes if not o.complete) if s is not None else 0
    return Evidence(answers, rest, n, unended)


def expectation(utility_name: str, candidates: list, evidence: Evidence, matrix=None) -> Expectation:
    """One utility over the three kinds of evidence, the winner and its certificate."""
    cols = evidence.answers
    matrix = matrix if matrix is not None else utility_matrix(utility_name, candidates, cols)
    probs = [a.prob for a in cols]
    lower = expected(matrix, probs)
    # an answer not found is never a candidate's own token ids: under exact match it adds nothing
    upper = list(lower) if utility_name == "exact" else [min(x + evidence.rest, 1.0) for x in lower]
    estimate = stderr = weighted = None
    n = evidence.samples
    if n:
        counts = [a.count for a in cols]
        estimate = [math.fsum(c * u for c, u in zip(counts, row)) / n for row in matrix]
        squares = [math.fsum(c * u * u for c, u in zip(counts, row)) for row in matrix]
        stderr = [math.sqrt(max(sq - n * m * m, 0.0) / (n - 1) / n) if n > 1 else math.nan
                  for sq, m in zip(squares, estimate)]
        sampled = sum(p for p, c in zip(probs, counts) if c)
        if sampled > 0:
            weighted = [math.fsum(p * u for p, u, c in zip(probs, row, counts) if c) / sampled for row in matrix]
    winner = min(range(len(candidates)), key=lambda i: (-lower[i], *_order(candidates[i])))
    own = key_of(utility_name, candidates[winner])
    rivals = [upper[i] for i in range(len(candidates)) if key_of(utility_name, candidates[i]) != own]
    margin = lower[winner] - max(rivals) if rivals else lower[winner]
    sample_winner = None
    if estimate is not None and any(a.count for a in cols):
        sample_winner = min(range(len(candidates)), key=lambda i: (-estimate[i], *_order(candidates[i])))
    return Expectation(utility_name, tuple(tuple(r) for r in matrix), tuple(lower), tuple(upper),
                       _tuple(estimate), _tuple(stderr), _tuple(weighted), winner, margin > 0 or not rivals, margin,
                       sample_winner)


def _tuple(x):
    return None if x is None else tuple(x)


def clusters_of(evidence: Evidence) -> list:
    """The columns grouped by normalised text, heaviest (exact mass) first, then most voted."""
    groups: dict = {}
    for a in evidence.answers:
        groups.setdefault(normalise(a.text), []).append(a)
    out = [Cluster(key, tuple(sorted(members, key=_order)), math.fsum(a.prob for a in members),
                   sum(a.count for a in members)) for key, members in groups.items()]
    return sorted(out, key=lambda c: (-c.mass, -c.votes, c.key))


def majority_of(run) -> Majority | None:
    """Self-consistency's answer: the normalised text most samples share (ties: the heavier group, then the
    text), shown by its most sampled member. None without a complete sample."""
    s = run.samples
    done = [o for o in (s.outcomes if s is not None else ()) if o.complete]
    if not done:
        return None
    votes: dict = {}
    mass: dict = {}
    for o in done:
        key = normalise(o.text)
        votes[key] = votes.get(key, 0) + o.count
        mass[key] = mass.get(key, 0.0) + math.exp(o.logprob)
    key = min(votes, key=lambda k: (-votes[k], -mass[k], k))
    best = min((o for o in done if normalise(o.text) == key), key=lambda o: (-o.count, -o.logprob, o.token_ids))
    return Majority(key, votes[key], s.samples, Known(best.token_ids, best.text, best.logprob, ("sample",),
                                                      best.count))


def agree(run, utilities=UTILITIES, k: int = DEFAULT_CANDIDATES) -> Agreement:
    """Every number of the agreement panel, from a run alone."""
    utilities = parse_utilities(utilities if isinstance(utilities, str) else ",".join(map(str, utilities)))
    k = check_limit(k)
    known = known_answers(run)
    candidates = choose_candidates(run, known, k)
    evidence = gather_evidence(run, known, candidates)
    results = {u: expectation(u, candidates, evidence) for u in utilities} if candidates else {}
    tree = run.tree
    clusters = clusters_of(evidence)
    mode = 0 if candidates else None              # the most probable answer known leads them
    return Agreement(
        candidates=tuple(candidates), ranks=tuple(tree.rank_of(a.logprob) for a in candidates),
        sure=tuple(tree.beyond_reach(a.logprob) for a in candidates), evidence=evidence, results=results,
        clusters=tuple(clusters), cluster_entropy=max(entropy_of([c.mass for c in clusters]), 0.0),
        vote_entropy=max(entropy_of([c.votes for c in clusters]), 0.0) if evidence.samples else math.nan,
        mode=mode, mode_certified=mode is not None and tree.beyond_reach(candidates[0].logprob),
        majority=majority_of(run), limit=k,
        utilities=utilities)
