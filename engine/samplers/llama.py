"""llama.cpp's samplers as logits processors, each after its own rules (src/llama-sampling.cpp).

llama.cpp keeps a shrinking array of candidates; here a dropped candidate is a score of -inf, so the
softmax of what is left is the same. What differs from transformers' samplers of the same name:
  - penalties: repeat, frequency and presence in one stage, over the last `penalty_last_n` tokens of the
    context (prompt included, as llama.cpp's server and CLI accept the prompt's tokens), not the whole of it;
  - top-k keeps exactly k tokens (a tie at the k-th place is broken), transformers keeps every tie;
  - typical-p keeps tokens until their sum exceeds p (transformers: until it reaches p);
  - min tokens kept is 0 (llama.cpp's `min_keep` default): only the first token is always kept;
  - temperature comes last by default (and may be dynamic: its value set by the entropy);
  - XTC and mirostat draw: XTC's chance is a generator seeded from the run's seed and the position, so the
    draw is the same whenever the step is recomputed; mirostat truncates with μ, which it learns from the
    surprise of each token drawn (see Mirostat).

DRY works on tokens, as llama.cpp does: a sequence breaker is a token whose text contains one of the breaker
strings, or a breaker split over tokens, a token ending with the breaker's first characters followed by the
tokens of the rest (as the model's tokenizer writes the rest alone, at most 20 of them; llama.cpp's
get_overlapping_token_sequences). The split form needs the tokenizer: a chain prepared without one (a
recorded trace's vocabulary alone) matches breakers inside one token only. Breakers are cut to 40
characters, as llama.cpp cuts them (it counts bytes).
"""
from __future__ import annotations

import bisect
import functools
import itertools
import math
from dataclasses import dataclass, field

import torch

from engine.samplers.chain import NEG_INF, ChainStage, finite_count
from engine.errors import ConfigError

FLOAT_MAX_LOG = 88.7228391      # llama.cpp's clamp of DRY's exponent: base ** exponent stays a float
FIRST_LOOK = 256                # tokens ranked before a full sort, as llama.cpp's top-p tries first
BREAKER_CHARS = 40              # a DRY breaker is cut to this length (llama.cpp's MAX_CHAR_LEN)
BREAKER_TAIL = 20               # and the tokens of a split breaker's rest to this many (its MAX_SEQ_LEN)


def candidates(row: torch.Tensor) -> torch.Tensor:
    """The ids of the tokens still possible in one row of scores (llama.cpp's candidate array)."""
    return (~torch.isneginf(row)).nonzero().flatten()


def prefix_until(probs: torch.Tensor, key: torch.Tensor, keeps, largest: bool) -> torch.Tensor:
    """Positions (into probs) of the tokens ranked by `key` (largest or smallest first) that a cumulative rule
    keeps: keeps(mass ranked before a token) is True for a kept token; the first token always stays. The top
    FIRST_LOOK are ranked first and the whole set only when their mass does not settle the rule."""
    n = probs.numel()
    if n == 0:
        return torch.zeros(0, dtype=torch.long)
    k = min(n, FIRST_LOOK)
    while True:
        order = torch.topk(key, k, largest=largest, sorted=True).indices
        ranked = probs[order]
        before = torch.cumsum(ranked, 0) - ranked
        kept = keeps(before)
        kept[0] = True
        if k == n or not bool(kept[-1]):
            return order[kept]
        k = n


def window(context_row: list, last_n: int) -> list:
    """The tokens a stage looks back over: the last `last_n` of the context; -1 = all of it, 0 = none."""
    if last_n == 0:
        return []
    return context_row if last_n < 0 else context_row[-last_n:]


class Penalties(ChainStage):
    """Repeat, frequency and presence penalties over a window, in one pass (llama_sampler_penalties_apply):
    for every token seen c > 0 times in the window, logit /= repeat when positive (*= repeat when not), then
    logit -= c * frequency + presence."""

    def __init__(self, repeat: float, frequency: float, presence: float, last_n: int):
        super().__init__()
        self.repeat, self.frequency, self.presence, self.last_n = repeat, frequency, presence, last_n
        self.stage = ("penalties", float(repeat))

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        for row in range(scores.shape[0]):
            seen = window(input_ids[row].tolist(), self.last_n)
            if row == 0:
                self.last_state = {"window": len(seen)}
            if not seen:
                continue
            counts = torch.bincount(torch.tensor(seen, dtype=torch.long), minlength=scores.shape[-1])
            counts = counts[:scores.shape[-1]].to(scores.dtype)
            hit = counts > 0
            logits = scores[row]
            repeated = torch.where(logits <= 0, logits * self.repeat, logits / self.repeat)
            repeated = repeated - counts * self.frequency - hit.to(scores.dtype) * self.presence
            scores[row] = torch.where(hit, repeated, logits)
        return scores


@dataclass(frozen=True)
class BreakerTokens:
    """A vocabulary's sequence breakers as tokens. `whole`: the tokens whose text holds a breaker; `tails`:
    {head: its tails, longest first} for a breaker split over tokens, head the token ending with the breaker's
    first characters and a tail the token ids of the rest."""
    whole: frozenset = frozenset()
    tails: dict = field(default_factory=dict)


def split_rests(text: str, breaker: str) -> list:
    """The rests of `breaker` after each of its beginnings that `text` ends with, the longest beginning first:
    'xa' and 'ab c' give ['b c']; a text holding the whole breaker is a breaker by itself, not a head."""
    if breaker in text:
        return []
    return [breaker[k:] for k in range(min(len(text), len(breaker) - 1), 0, -1) if text.endswith(breaker[:k])]


MAX_SPLIT_PAIRS = 1_000_000     # (head, rest) pairs the split breakers may give in one vocabulary


class Vocabulary:
    """A vocabulary's texts indexed once for the breaker scan: joined by a separator no breaker holds (each
    breaker is then one C-level search of the whole vocabulary), and reversed and sorted (the tokens that end
    with a string are one run of that order, found by bisection). The scan's Python work is then the tokens it
    finds, not the vocabulary times the breakers (64 breakers of 40 characters on Gemma's 262,144 texts took
    20 s)."""

    def __init__(self, token_texts):
        texts = list(token_texts)
        self.texts = texts
        chars = set("".join(texts))
        self.separator = next(chr(c) for c in range(1, 0x110000) if chr(c) not in chars)
        self.joined = self.separator.join(texts)
        self.starts = list(itertools.accumulate((len(t) + 1 for t in texts[:-1]), initial=0))

    @functools.cached_property
    def _by_ending(self) -> tuple:
        """(the texts reversed, sorted; their ids): built for the first breaker that can be split."""
        order = sorted(range(len(self.texts)), key=lambda i: self.texts[i][::-1])
        return [self.texts[i][::-1] for i in order], order

    def holding(self, breakers: tuple) -> set:
        """The ids of the tokens whose text holds one of `breakers` (none of which holds the separator)."""
        found = set()
        for breaker in breakers:
            at = self.joined.find(breaker)
            while at >= 0:
                token = bisect.bisect_right(self.starts, at) - 1
                found.add(token)
                at = self.joined.find(breaker, self.starts[token + 1] if token + 1 < len(self.starts)
                                      else len(self.joined))
        return found

    def ending_with(self, suffix: str):
        """The ids of the tokens whose text ends with `suffix`."""
        key = suffix[::-1]
        endings, ids = self._by_ending
        i = bisect.bisect_left(endings, key)
        while i < len(endings) and endings[i].startswith(key):
            yield ids[i]
            i += 1


_VOCABULARIES: dict = {}    # id of a vocabulary's texts -> (those texts, Vocabulary)


def vocabulary(token_texts) -> Vocabulary:
    kept = _VOCABULARIES.get(id(token_texts))
    if kept is None or kept[0] is not token_texts:
        if len(_VOCABULARIES) >= 4:
            _VOCABULARIES.pop(next(iter(_VOCABULARIES)))
        kept = _VOCABULARIES[id(token_texts)] = (token_texts, Vocabulary(token_texts))
    return kept[1]


def scan_breakers(token_texts, breakers: tuple, tokenize=None) -> BreakerTokens:
    """The whole breakers' tokens, and for each breaker that can be split the tokens ending with one of its
    beginnings and the tokens of the rest (get_overlapping_token_sequences for each breaker). Without
    `tokenize` only the whole ones are found. Refuses (ConfigError) breakers that split over more than
    MAX_SPLIT_PAIRS pairs."""
    breakers = tuple(dict.fromkeys(b[:BREAKER_CHARS] for b in breakers if b))
    index = vocabulary(token_texts)
    whole = index.holding(tuple(b for b in breakers if index.separator not in b))   # (no text holds the others)
    tails: dict = {}
    pairs = 0
    for breaker in (b for b in breakers if len(b) > 1 and tokenize is not None):
        rests: dict = {}
        for k in range(len(breaker) - 1, 0, -1):          # the longest beginning first, as split_rests
            rest = breaker[k:]
            for i in index.ending_with(breaker[:k]):
                if breaker in index.texts[i]:             # a breaker by itself, not a head
                    continue
                pairs += 1
                if pairs > MAX_SPLIT_PAIRS:
                    raise ConfigError("dry_sequence_breakers", "dry_sequence_breakers: these breakers split over "
                                      f"more than {MAX_SPLIT_PAIRS:,} pairs of tokens in this vocabulary (each "
                                      "token ending with a breaker's beginning is one); use fewer or other "
                                      "breakers")
                if rest not in rests:
                    rests[rest] = tuple(int(t) for t in tokenize(rest))[:BREAKER_TAIL]
                if rests[rest]:
                    tails.setdefault(i, set()).add(rests[rest])
                else:                   # a rest that gives no tokens: the head alone is the breaker
                    whole.add(i)
    return BreakerTokens(frozenset(whole), {head: tuple(sorted(found, key=len, reverse=True))
                                            for head, found in tails.items()})


_BREAKERS: dict = {}      # (id of a vocabulary's texts, breakers, split or not) -> (those texts, BreakerTokens)


def breaker_tokens(token_texts, breakers: tuple, tokenize=None) -> BreakerTokens:
    """scan_breakers, once per vocabulary and breaker list: the stage view builds a chain at every redraw, and
    a scan of SmolLM2's 49,152 texts takes about 17 ms of CPU with the default breakers, 30 ms with "### "
    added. A vocabulary's texts and its tokenizer come together, so the key holds only whether there is one."""
    key = (id(token_texts), len(token_texts), breakers, tokenize is not None)
    kept = _BREAKERS.get(key)
    if kept is None or kept[0] is not token_texts:
        found = scan_breakers(token_texts, breakers, tokenize)
        if len(_BREAKERS) >= 8:
            _BREAKERS.pop(next(iter(_BREAKERS)))
        kept = _BREAKERS[key] = (token_texts, found)       # the texts held, so their id is not reused
    return kept[1]


class Dry(ChainStage):
    """DRY, "don't repeat yourself" (llama_sampler_dry_apply): when the context ends with a run of tokens that
    occurred before, the token that followed that earlier run would extend the repetition; its logit loses
    multiplier * base ** (run length - allowed length), for runs at least `allowed_length` long. The latest
    sequence breaker in the context limits how far back a run may reach. A token that is a breaker by itself
    is never penalised; the head of a split breaker may be, as in llama.cpp."""

    def __init__(self, multiplier: float, base: float, allowed_length: int, last_n: int, breakers: list):
        super().__init__()
        self.multiplier, self.base, self.allowed, self.last_n = multiplier, base, allowed_length, last_n
        self.breakers = [b for b in breakers if b]
        self.breaker_ids: frozenset = frozenset()     # tokens that are a breaker by themselves
        self.breaker_tails: dict = {}                 # {head: tails, longest first} of split breakers
        self.stage = ("dry", float(multiplier))

    def prepare(self, prompt_length=None, token_texts=None, tokenize=None) -> None:
        if token_texts is not None:
            found = breaker_tokens(token_texts, tuple(self.breakers), tokenize)
            self.breaker_ids, self.breaker_tails = found.whole, found.tails

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        for row in range(scores.shape[0]):
            penalties = self.penalties(window(input_ids[row].tolist(), self.last_n))
            if row == 0:
                self.last_state = {"run": max(penalties.values(), default=0), "penalised": len(penalties)}
            for token, run in penalties.items():
                if token < scores.shape[-1]:
                    exponent = run - self.allowed
                    if self.base > 1.000001:
                        exponent = min(exponent, int(FLOAT_MAX_LOG / math.log(self.base)))
                    scores[row, token] -= self.multiplier * self.base ** exponent
        return scores

    def rep_limit(self, last: list) -> int:
        """How far back a run may reach: i - (its tail's length) for the latest breaker whose head is i tokens
        before the end (a breaker by itself: a tail of 0), the whole window when there is none. A split
        breaker counts only once all of its tail is in the context; the longest tail that matches wins."""
        tails = self.breaker_tails
        for i, token in enumerate(last):
            longest = 0 if token in self.breaker_ids else -1
            for tail in tails.get(token, ()) if tails else ():
                if longest < len(tail) <= i and all(tail[o] == last[i - o - 1] for o in range(len(tail))):
                    longest = len(tail)
                    break                         # tails run longest first
            if longest >= 0:
                return i - longest
        return len(last)

    def penalties(self, tokens: list) -> dict:
        """{token: the longest run it would extend} for the tokens DRY penalises after `tokens`."""
        n = len(tokens)
        if n <= self.allowed:
            return {}
        last = tokens[::-1]                       # last[i]: the token i places before the end
        rep_limit = self.rep_limit(last)
        if rep_limit < self.allowed:
            return {}
        # repeat[k]: how many tokens ending k places before the end match the tokens ending at the end
        # (the Z-algorithm on the reversed context, as llama.cpp computes it), at most rep_limit
        repeat = [0] * n
        lt = rt = 0
        for k in range(1, n):
            if k > rt:
                m = 0
                while m + k < n and last[m] == last[m + k]:
                    m += 1
                repeat[k] = min(m, rep_limit)
                if m > 0:
                    lt, rt = k, k + m - 1
            else:
                p = k - lt
                right = rt - k + 1
                if repeat[p] < right:
                    repeat[k] = min(repeat[p], rep_limit)
                else:
                    i = rt + 1
                    while i < n and last[i] == last[i - k]:
                        i += 1
                    repeat[k] = min(i - k, rep_limit)
                    lt, rt = k, i - 1
        runs: dict = {}
        for k in range(1, n):
            length = repeat[k]
            if length >= self.allowed:
                token = last[k - 1]               # the token that followed the earlier run
                if token not in self.breaker_ids and runs.get(token, -1) < length:
                    runs[token] = length
        return runs


class TopNSigma(ChainStage):
    """Keep the logits within n standard deviations of the top one (llama_sampler_top_n_sigma_apply): the mean
    and the population deviation are taken over the tokens still possible."""

    def __init__(self, n: float):
        super().__init__()
        self.n, self.stage = n, ("top_n_sigma", float(n))

    def __call__(self, input_ids, scores):
        if self.n <= 0 or scores.shape[-1] <= 1:
            return scores
        finite = ~torch.isneginf(scores)
        count = finite.sum(-1, keepdim=True).clamp_min(1)
        values = torch.where(finite, scores, torch.zeros_like(scores))
        mean = values.sum(-1, keepdim=True) / count
        std = (torch.where(finite, (scores - mean) ** 2, torch.zeros_like(scores)).sum(-1, keepdim=True) / count).sqrt()
        top = scores.max(-1, keepdim=True).values
        return scores.masked_fill(scores < top - self.n * std, NEG_INF)


class TopK(ChainStage):
    """Keep exactly the k most likely tokens (llama_sampler_top_k_impl): a tie at the k-th place is broken."""

    def __init__(self, k: int):
        super().__init__()
        self.k, self.stage = k, ("top_k", float(k))

    def __call__(self, input_ids, scores):
        if self.k <= 0 or self.k >= scores.shape[-1]:
            return scores
        keep = torch.zeros_like(scores, dtype=torch.bool)
        keep.scatter_(-1, torch.topk(scores, self.k, dim=-1).indices, True)
        return scores.masked_fill(~keep, NEG_INF)


class Typical(ChainStage):
    """Locally typical sampling (llama_sampler_typical_apply): rank tokens by |-ln p - H| and keep them, in
    that order, until their probabilities add up to more than p."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.stage = p, ("typical_p", float(p))

    def __call__(self, input_ids, scores):
        if self.p >= 1.0:
            return scores
        out = torch.full_like(scores, NEG_INF)
        for row in range(scores.shape[0]):
            ids = candidates(scores[row])
            probs = torch.softmax(scores[row, ids], dim=-1)
            entropy = torch.special.entr(probs).sum()
            shifted = (-torch.log(probs) - entropy).abs()
            keep = prefix_until(probs, shifted, lambda before: before <= self.p, largest=False)
            out[row, ids[keep]] = scores[row, ids[keep]]
        return out


class TopP(ChainStage):
    """Keep the most likely tokens, in order, until their probabilities add up to p (at least one)."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.stage = p, ("top_p", float(p))

    def __call__(self, input_ids, scores):
        if self.p >= 1.0:
            return scores
        out = torch.full_like(scores, NEG_INF)
        for row in range(scores.shape[0]):
            ids = candidates(scores[row])
            probs = torch.softmax(scores[row, ids], dim=-1)
            keep = prefix_until(probs, probs, lambda before: before < self.p, largest=True)
            out[row, ids[keep]] = scores[row, ids[keep]]
        return out


class MinP(ChainStage):
    """Keep the tokens at least min_p times as likely as the top one: logit >= top logit + ln(min_p); the top
    token always stays (llama_sampler_min_p_apply: "first token always matches")."""

    def __init__(self, min_p: float):
        super().__init__()
        self.min_p, self.stage = min_p, ("min_p", float(min_p))

    def __call__(self, input_ids, scores):
        if self.min_p <= 0.0:
            return scores
        top = scores.max(dim=-1, keepdim=True).values
        floor = torch.minimum(top + math.log(self.min_p), top)     # min_p above 1 still keeps the top token
        return scores.masked_fill(scores < floor, NEG_INF)


def position_generator(seed: int, position: int, salt: int) -> torch.Generator:
    """A generator for one draw at one position of one run: the same seed, position and salt, the same draw."""
    return torch.Generator().manual_seed((seed * 1_000_003 + position * 7919 + salt) % (2**63 - 1))


class Xtc(ChainStage):
    """Exclude top choices (llama_sample_xtc_apply): with chance `probability`, remove every token at or above
    `threshold` but the least likely of them. It does nothing (and draws nothing) when the threshold is above
    0.5 or fewer than two tokens are left. The draw u comes from a generator seeded from the run's seed and
    the position, and is recorded: {"draw": u, "fired": u <= probability}."""

    SALT = 0x585443     # "XTC": its draws are not the sampler's

    def __init__(self, probability: float, threshold: float, seed: int):
        super().__init__()
        self.probability, self.threshold, self.seed = probability, threshold, seed
        self.stage = ("xtc", float(threshold))

    def __call__(self, input_ids, scores):
        self.last_state = {"fired": False}
        if self.probability <= 0 or self.threshold > 0.5 or int(finite_count(scores[:1])[0]) < 2:
            return scores
        u = float(torch.rand(1, generator=position_generator(self.seed, input_ids.shape[-1], self.SALT)))
        fired = u <= self.probability
        self.last_state = {"draw": u, "fired": fired}
        if not fired:
            return scores
        probs = torch.softmax(scores, dim=-1)
        above = probs >= self.threshold
        # all of the tokens at or above the threshold go but the least likely of them (one, if tied)
        last = torch.where(above, probs, torch.full_like(probs, 2.0)).argmin(-1, keepdim=True)
        drop = above & (above.sum(-1, keepdim=True) > 1)
        drop.scatter_(-1, last, False)
        return scores.masked_fill(drop, NEG_INF)


class Temperature(ChainStage):
    """Divide the logits by the temperature (llama_sampler_temp_ext_apply). With a range r > 0 the temperature
    is dynamic: T = max(0, t - r) + 2r · (H / ln n) ** exponent, from the entropy H of the n tokens left; its
    value at the step is recorded. A temperature of 0 keeps the most likely token alone."""

    def __init__(self, temperature: float, dynamic_range: float = 0.0, exponent: float = 1.0):
        super().__init__()
        self.temperature, self.range, self.exponent = temperature, dynamic_range, exponent
        self.stage = ("temperature", float(temperature))

    def effective(self, scores: torch.Tensor) -> torch.Tensor:
        """[batch, 1] the temperature each row is divided by."""
        t = torch.full((scores.shape[0], 1), float(self.temperature), dtype=torch.float64)
        if self.range <= 0:
            return t
        n = finite_count(scores).to(torch.float64)[:, None]
        entropy = torch.special.entr(torch.softmax(scores.double(), -1)).sum(-1, keepdim=True)
        low, high = max(0.0, self.temperature - self.range), self.temperature + self.range
        normalised = torch.where(n > 1, entropy / torch.log(n.clamp_min(2)), torch.zeros_like(n))
        return torch.where(n > 1, low + (high - low) * normalised ** self.exponent, t)

    def __call__(self, input_ids, scores):
        t = self.effective(scores)
        if self.range > 0:
            self.last_state = {"temperature": float(t[0, 0])}
        out = scores / t.clamp_min(1e-30).to(scores.dtype)
        greedy = (t <= 0).expand_as(scores)
        if bool(greedy.any()):
            top = torch.zeros_like(scores, dtype=torch.bool)
            top.scatter_(-1, scores.argmax(-1, keepdim=True), True)
            out = torch.where(greedy, scores.masked_fill(~top, NEG_INF), out)
        return out


class Mirostat(ChainStage):
    """Mirostat v1 / v2 (llama_sampler_mirostat_apply, _v2_apply): a truncation steered towards a target
    surprise τ (bits). v2 keeps the tokens whose surprise -log2 p is at most μ (at least the top one); v1 keeps
    the top k, k estimated from μ and the Zipf exponent of the 100 most likely tokens. After the draw,
    μ ← μ - η (surprise of the drawn token, in the kept set - τ); μ starts at 2τ.

    llama.cpp keeps μ in the sampler. Here μ belongs to the context it was reached at: `accept` stores the
    μ of the next context, keyed by the context, so a step recomputed later (a replay, the stage view, a
    branch given the parent's store by `carry`) finds the μ it had. The draw is the decoder's: from the
    truncated distribution, as llama.cpp draws."""

    M = 100             # tokens v1 fits the Zipf exponent on (common_sampler_init passes 100)
    MAX_SURPRISE = 64.0  # bits: a forced token the distribution gave no chance

    def __init__(self, version: int, tau: float, eta: float):
        super().__init__()
        self.version, self.tau, self.eta = version, tau, eta
        self.stage = ("mirostat", float(tau))
        self.mu_by_context: dict = {}
        self._last = None      # (mu, probs received [V], probs kept [V]) of row 0 at the last call

    @staticmethod
    def key(row: list) -> tuple:
        return len(row), hash(tuple(row))

    def mu_at(self, row: list) -> float:
        return self.mu_by_context.get(self.key(row), 2.0 * self.tau)

    def truncate(self, logits: torch.Tensor, mu: float) -> torch.Tensor:
        """[V] bool: the tokens kept at μ."""
        probs = torch.softmax(logits.double(), -1)
        size = int(finite_count(logits[None])[0])
        keep = torch.zeros_like(probs, dtype=torch.bool)
        if self.version == 2:
            keep = (probs >= 2.0 ** -mu) & (probs > 0)       # surprise -log2 p <= μ
            keep[probs.argmax()] = True
            return keep
        top = torch.topk(probs, min(self.M, max(size, 1))).values.tolist()
        t = [math.log((i + 2) / (i + 1)) for i in range(len(top) - 1)]
        b = [math.log(top[i] / top[i + 1]) if top[i + 1] > 0 else 0.0 for i in range(len(top) - 1)]
        squares = sum(x * x for x in t)
        s_hat = sum(x * y for x, y in zip(t, b)) / squares if squares else 1.0
        epsilon = s_hat - 1
        try:
            k = int((epsilon * 2 ** mu / (1 - logits.shape[-1] ** (-epsilon))) ** (1 / s_hat))
        except (ZeroDivisionError, OverflowError, ValueError, TypeError):
            k = size
        keep[torch.topk(probs, max(1, min(k, max(size, 1)))).indices] = True
        return keep

    def __call__(self, input_ids, scores):
        out = scores.clone()
        for row in range(scores.shape[0]):
            mu = self.mu_at(input_ids[row].tolist())
            keep = self.truncate(scores[row], mu)
            out[row] = scores[row].masked_fill(~keep, NEG_INF)
            if row == 0:
                self._last = (mu, torch.softmax(scores[row].double(), -1), torch.softmax(out[row].double(), -1))
                self.last_state = {"mu": mu}
        return out

    def next_mu(self, token: int) -> float:
        """μ after drawing `token` at the last call."""
        mu, received, kept = self._last
        p = float(kept[token]) if kept[token] > 0 else float(received[token])
        surprise = min(-math.log2(p), self.MAX_SURPRISE) if p > 0 else self.MAX_SURPRISE
        return mu - self.eta * (surprise - self.tau)

    def state(self, chosen: int | None = None) -> dict:
        out = dict(self.last_state)
        if chosen is not None and self._last is not None:
            out["mu_next"] = self.next_mu(chosen)
        return out

    def accept(self, context: torch.Tensor, token: int) -> None:
        if self._last is not None:
            self.mu_by_context[self.key(context[0].tolist() + [int(token)])] = self.next_mu(token)

    def carry(self, other: "Mirostat") -> None:
        self.mu_by_context = dict(other.mu_by_context)
