"""The continuation tree: the most probable prefixes expanded best-first, with an exact ledger of the mass.

Every node is a prefix of the answer (token ids after the prompt) and holds its path mass m(v), the product
of the next-token probabilities along it. Expanding a node (one row of a batched forward pass) gives its
whole next-token distribution, which splits m(v) exactly into
  - the end: m(v) * p(end | v), summed over every end id: a *complete answer*; with stop strings, also each
    next token whose text completes one (stops.py), grouped by the answer's text, the `branch` most probable
    answers kept;
  - the `branch` most probable other tokens: children, expanded later or left as open prefixes;
  - the rest (and the answers not kept): the mass *left out*, a grey stub under the node.
A node at the depth is expanded for its end only; the mass of its continuations is *cut at the depth*
(prefixes longer than the search looks). So, summed over the tree,

    answers + open prefixes (not expanded) + cut at the depth + left out = 1,

which `Ledger.total` shows and the tests check against brute force. An answer not found extends an open
prefix or a child left out, so it is at most the largest of their masses (`Ledger.bound`): when the k-th
answer found is at least that, no answer the search has not found can beat it, and the top k are the
model's true top k among answers of at most `depth` tokens (`AnswerTree.certified`).
"""
from __future__ import annotations

import bisect
import functools
import heapq
import math
import time
from dataclasses import dataclass, field

import torch

from ..config import MAX_ANSWER_DEPTH as MAX_DEPTH, MAX_TREE_BATCH as MAX_BATCH
from ..config import MAX_TREE_BRANCH as MAX_BRANCH, MAX_TREE_BUDGET as MAX_BUDGET
from ..errors import ConfigError
from ..model import LoadedModel
from .distribution import Distribution, entropy_and_varentropy, next_logprobs
from engine.decoding import prefill
from .passes import PromptCache
from .stops import Endings, answer_text, check_stops


LOGPROB_ROWS = 16     # rows whose float64 log-probabilities, entropy and varentropy are worked out at a time
#                       (a batch of 64 on Gemma's 262,144 tokens took about 0.9 GB of float64 at once)


@dataclass(frozen=True)
class TreeSettings:
    depth: int = 8              # an answer has at most this many tokens before its end
    budget: int = 200           # expansions, the prompt's own included
    branch: int = 8             # children kept per expanded node, most probable first
    batch: int = 16             # prefixes expanded per forward pass
    distribution: Distribution = field(default_factory=Distribution)
    stops: tuple = ()           # stop strings: an answer also ends before the first of them (stops.py)

    def check(self) -> "TreeSettings":
        for name, value, top in (("depth", self.depth, MAX_DEPTH), ("budget", self.budget, MAX_BUDGET),
                                 ("branch", self.branch, MAX_BRANCH), ("batch", self.batch, MAX_BATCH)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ConfigError(name, f"{name}: must be a whole number from 1 to {top}, got {value!r}",
                                  "whole_number", name=name, most=top, got=repr(value)[:40])
        self.distribution.check()
        if check_stops(self.stops) != self.stops:
            raise ConfigError("stop", "stop: give the stop strings as a tuple, each once")
        return self


@dataclass(frozen=True)
class Prefix:
    """One node: a prefix of the answer, and what its expansion found."""
    id: int
    parent: int               # -1 for the root (the empty prefix)
    token_id: int             # the token that extends the parent (-1 for the root)
    text: str                 # that token as the app shows it
    depth: int                # tokens after the prompt
    logprob: float            # log m(v), natural log, under the tree's distribution
    expanded: bool = False
    end_prob: float = 0.0     # p(end | prefix), summed over the end ids (0 until expanded)
    left_out: float = 0.0     # mass (path-level) of the continuations neither kept nor ending: grey stub
    cut: float = 0.0          # at the depth: mass of the continuations longer than the search looks
    best_left_out: float = 0.0    # path mass of the most probable child left out (the certificate reads it)
    entropy: float = math.nan     # of the next token here, in nats (once expanded)
    varentropy: float = math.nan  # Var[-log p] of the next token here, in nats^2

    @property
    def mass(self) -> float:
        return math.exp(self.logprob)


@dataclass(frozen=True)
class Answer:
    """A complete answer: a prefix followed by an end token, or by a token that completes a stop string (the
    next tokens of one prefix that leave the same text are one answer: stops.py)."""
    node_id: int
    token_ids: tuple          # the prefix's tokens: the end token, or the token that stopped it, not included
    text: str
    logprob: float            # log m(prefix) + log p(the tokens that end it with this text | prefix)
    stop: bool = False        # a stop string ended it (for some of its probability, at least)

    @property
    def key(self) -> tuple:
        """What makes an answer one answer: its prefix's tokens and its text."""
        return self.token_ids, self.text

    @property
    def prob(self) -> float:
        return math.exp(self.logprob)


@dataclass(frozen=True)
class Ledger:
    """Where the tree's mass is, in four parts that add up to 1."""
    answers: float            # complete answers found
    open_prefixes: float      # prefixes the budget left unexpanded
    cut_at_depth: float       # continuations past the depth
    left_out: float           # children of expanded nodes not kept
    bound: float              # no answer not found is more probable than this

    @property
    def prefixes(self) -> float:
        return self.open_prefixes + self.cut_at_depth

    @property
    def total(self) -> float:
        return self.answers + self.open_prefixes + self.cut_at_depth + self.left_out


def ledger_of(nodes, answers) -> Ledger:
    """The ledger, worked out from the nodes and answers alone (a tree read from a file is never taken at its
    word): every node not expanded is an open prefix."""
    open_masses = [n.mass for n in nodes if not n.expanded]
    return Ledger(answers=sum(a.prob for a in answers), open_prefixes=sum(open_masses),
                  cut_at_depth=sum(n.cut for n in nodes), left_out=sum(n.left_out for n in nodes),
                  bound=max(open_masses + [n.best_left_out for n in nodes] + [0.0]))


@dataclass(frozen=True)
class AnswerTree:
    prompt_ids: tuple
    settings: TreeSettings
    nodes: tuple              # Prefix, by id (the root is 0)
    answers: tuple            # Answer, most probable first
    expansions: int           # prefixes expanded (rows of forward passes)
    passes: int               # forward passes, the prompt's included
    seconds: float
    stopped: bool = False     # ended early by the caller (the page's Stop)

    @functools.cached_property
    def ledger(self) -> Ledger:
        return ledger_of(self.nodes, self.answers)

    def certified(self, k: int) -> bool:
        """True when the top k answers found are the top k of every answer of at most `depth` tokens."""
        return len(self.answers) >= k >= 1 and self.answers[k - 1].prob >= self.ledger.bound

    @property
    def certified_count(self) -> int:
        """How many of the answers found, from the top, are certified to be the model's top ones."""
        return sum(1 for a in self.answers if a.prob >= self.ledger.bound)

    def path(self, node_id: int) -> list:
        """The nodes from the root's first child to `node_id`."""
        out = []
        while node_id > 0:
            out.append(self.nodes[node_id])
            node_id = self.nodes[node_id].parent
        return out[::-1]

    def beyond_reach(self, logprob: float) -> bool:
        """True when an answer this probable is at least the bound: no answer not found can beat it, so its
        rank among the answers found is its rank among every answer of at most `depth` tokens."""
        return self.ledger.bound <= 0 or logprob >= math.log(self.ledger.bound)

    def rank_of(self, logprob: float) -> int:
        """1 + the number of answers found that are more probable (within 1e-6 in log, two computations of one
        answer's probability, a batched pass and a plain one, count as equal). By bisection: a saved run may
        rank hundreds of outcomes against thousands of answers."""
        return 1 + bisect.bisect_left(self._descending, -(logprob + 1e-6))

    def answer_for(self, token_ids, text: str) -> "Answer | None":
        """The answer found with exactly these tokens and this text (a stop string can leave two texts after one
        prefix), if any."""
        return self._by_key.get((tuple(token_ids), text))

    @functools.cached_property
    def _descending(self) -> list:
        """-log p of the answers found, ascending (the answers are most probable first)."""
        return sorted(-a.logprob for a in self.answers)

    @functools.cached_property
    def _by_key(self) -> dict:
        return {a.key: a for a in self.answers}


def end_ids(lm: LoadedModel) -> tuple:
    """Every id that ends an answer: the generation config's end ids (an instruct model's chat turn end is
    among them for SmolLM2 and Gemma) and the tokenizer's own end-of-text."""
    ids = set(int(i) for i in lm.eos_token_ids)
    eos = getattr(lm.tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    return tuple(sorted(i for i in ids if 0 <= i < lm.facts.vocab_size))


_ROOT = Prefix(id=0, parent=-1, token_id=-1, text="", depth=0, logprob=0.0)


def read_prompt(lm: LoadedModel, prompt_ids: list, should_stop=None, progress=None) -> PromptCache:
    """The prompt's forward pass, shared by the tree, the landings and the samples; a long prompt is read in
    parts, each reported as progress(fraction, line, snapshot) (an empty tree so far) and each a chance to stop."""
    empty = AnswerTree(tuple(prompt_ids), TreeSettings(), (_ROOT,), (), 0, 0, 0.0, True)

    def on_part(done: int, total: int) -> None:
        if progress is not None and total > prefill.PREFILL_TOKENS:
            progress(0.0, f"reading the prompt: {done:,} of {total:,} tokens", lambda: empty)
    return PromptCache(lm, prompt_ids, should_stop=should_stop, on_part=on_part)


def grow_tree(lm: LoadedModel, prompt_ids: list, settings: TreeSettings, should_stop=None,
              progress=None, prompt: PromptCache | None = None) -> AnswerTree:
    """Expand the most probable prefixes first, `settings.batch` per forward pass, until the budget of
    expansions is spent or nothing is left to expand. should_stop(): polled between passes (Stop keeps the
    tree so far); progress(fraction, line, snapshot): after each pass, snapshot() being the tree so far.
    prompt: the prompt's pass already run (read_prompt), else it is run here."""
    settings.check()
    t0 = time.perf_counter()
    dist, ends = settings.distribution, end_ids(lm)
    if not ends:
        raise ConfigError("model", "model: has no end-of-text token, so no answer can end", "no_end_token")
    endings = Endings(lm, ends, settings.stops)
    if prompt is None:
        prompt = read_prompt(lm, prompt_ids, should_stop, progress)
    nodes: list = [_ROOT]
    if prompt.stopped:
        return _tree(prompt_ids, settings, nodes, [], 0, prompt.passes, t0, True)
    kept_rows = prompt.fits_window(settings.depth)
    paths: dict = {0: ()}
    texts: dict = {0: b""}            # each prefix's bytes, searched for the stop strings
    frontier = [(-0.0, 0)]           # (-log m, id) of prefixes not expanded
    answers: list = []
    expansions, stopped = 0, False
    while frontier and expansions < settings.budget:
        if should_stop is not None and expansions and should_stop():
            stopped = True
            break
        take = min(settings.batch, settings.budget - expansions)
        batch = [heapq.heappop(frontier)[1] for _ in range(min(take, len(frontier)))]
        if batch == [0]:
            logits = prompt.logits
        elif kept_rows:
            logits = prompt.expand([(i, paths[i][-1], _ancestors(nodes, i)) for i in batch], settings.budget)
        else:
            logits = prompt.logits_after([paths[i] for i in batch])
        rows = [list(prompt_ids) + list(paths[i]) for i in batch]
        for row, node_id in enumerate(batch):
            if row % LOGPROB_ROWS == 0:          # the float64 work a few rows at a time
                part = slice(row, row + LOGPROB_ROWS)
                logprobs = next_logprobs(dist, rows[part], logits[part])
                h, v = entropy_and_varentropy(logprobs)
            lp = logprobs[row % LOGPROB_ROWS]
            node = nodes[node_id]
            mass = node.mass
            ending = endings.after(texts[node_id], lp)
            kept_end, end_out, best_out = _answers_here(lm, node, paths[node_id], ending, settings.branch, answers)
            others = lp.clone()
            others[ending.mask] = -math.inf
            probs = others.exp()
            rest = probs.sum().item()          # the mass of every continuation that does not end here
            kept_mass = 0.0
            if node.depth < settings.depth:
                k = min(settings.branch, int((probs > 0).sum()))
                top = torch.topk(others, k + 1 if k < others.numel() else k)
                for value, token in zip(top.values[:k].tolist(), top.indices[:k].tolist()):
                    child = Prefix(id=len(nodes), parent=node_id, token_id=token, text=lm.token_texts[token],
                                   depth=node.depth + 1, logprob=node.logprob + value)
                    nodes.append(child)
                    paths[child.id] = paths[node_id] + (token,)
                    texts[child.id] = endings.extend(texts[node_id], token)
                    heapq.heappush(frontier, (-child.logprob, child.id))
                    kept_mass += math.exp(value)
                if len(top.values) > k and top.values[k].item() > -math.inf:
                    best_out = max(best_out, math.exp(top.values[k].item()))
                left, cut = mass * (max(rest - kept_mass, 0.0) + end_out), 0.0
            else:
                left, cut = mass * end_out, mass * rest
            nodes[node_id] = _expanded(node, kept_end, left, cut, mass * best_out, h[row % LOGPROB_ROWS].item(),
                                       v[row % LOGPROB_ROWS].item())
        expansions += len(batch)
        if progress is not None:
            progress(expansions / settings.budget, f"{expansions:,} of {settings.budget:,} prefixes expanded",
                     functools.partial(_tree, prompt_ids, settings, nodes, answers, expansions, prompt.passes, t0,
                                       True))
    return _tree(prompt_ids, settings, nodes, answers, expansions, prompt.passes, t0, stopped)


def _tree(prompt_ids, settings, nodes, answers, expansions, passes, t0, stopped) -> AnswerTree:
    """The tree as it stands: between two passes every node is either expanded or open, so its ledger adds up."""
    return AnswerTree(prompt_ids=tuple(prompt_ids), settings=settings, nodes=tuple(nodes),
                      answers=tuple(sorted(answers, key=lambda a: -a.logprob)), expansions=expansions, passes=passes,
                      seconds=time.perf_counter() - t0, stopped=stopped)


def _answers_here(lm, node: Prefix, path: tuple, ending, keep: int, answers: list) -> tuple:
    """The answers that end right after `node`: the `keep` most probable (by text) join `answers`; the rest are
    left out like children not kept. Returns (the probability kept, left out, of the best left out), each given
    the prefix."""
    probs = ending.probs
    order = torch.argsort(probs, descending=True, stable=True)[:keep + 1].tolist()
    kept = 0.0
    for g in order[:keep]:
        p = probs[g].item()
        if p <= 0:
            break
        answers.append(Answer(node.id, path, answer_text(ending.keys[g], lambda: _text(lm, path)),
                              node.logprob + math.log(p), bool(ending.stopped[g])))
        kept += p
    best_out = probs[order[keep]].item() if len(order) > keep else 0.0
    return kept, max(ending.total - kept, 0.0), best_out


def _ancestors(nodes: list, node_id: int) -> list:
    """The ids of a node's ancestors below the root, from the root's child down to its parent."""
    out = []
    node = nodes[node_id].parent
    while node > 0:
        out.append(node)
        node = nodes[node].parent
    return out[::-1]


def _expanded(node: Prefix, end_prob, left, cut, best_out, h, v) -> Prefix:
    from dataclasses import replace

    return replace(node, expanded=True, end_prob=end_prob, left_out=left, cut=cut, best_left_out=best_out,
                   entropy=h, varentropy=v)


def _text(lm: LoadedModel, token_ids) -> str:
    """An answer's text as the tokenizer decodes it (special tokens kept, so an answer is never blank by
    accident); the empty answer is the empty string."""
    if not token_ids:
        return ""
    return lm.tokenizer.decode(list(token_ids), skip_special_tokens=False)
