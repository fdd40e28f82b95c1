"""The records a trace is made of: candidates, steps, the beam tree's nodes, sequences.

Frozen dataclasses of plain values, so a trace can be shown, shared and replayed without the model.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Candidate:
    """One of the top-N tokens at a step: what the model said and what the strategy did."""
    token_id: int
    text: str            # display text (byte pieces as <0xE4>)
    logit: float
    prob: float          # softmax of the raw logits
    logprob: float
    rank: int            # 1 = most likely under the raw distribution
    shaped_prob: float   # probability after temperature / top-k / top-p / min-p / penalty
    kept: bool           # survived truncation (shaped_prob > 0)


@dataclass(frozen=True)
class Neighbour:
    token_id: int
    text: str
    value: float         # cosine similarity, or mixture weight


@dataclass(frozen=True)
class FeedBack:
    """For soft and gumbel: the vector fed back instead of a token embedding."""
    nearest: list        # [Neighbour] by cosine, best first (10)
    nearest_cosine: float
    weights: list        # [Neighbour] the mixture's largest weights (10)
    argmax_id: int
    argmax_text: str
    entropy: float       # entropy of the mixture weights, in nats
    norm: float          # |e|
    nearest_norm: float  # |E[nearest]|


@dataclass(frozen=True)
class FedInput:
    """What a feed-back rule of engine.soft_inputs fed at one step, measured against the token it emitted."""
    kind: str               # mixture | id | hidden (the last position's final hidden state)
    nearest: list           # [Neighbour] the tokens nearest the fed vector by cosine, best first (10)
    emitted_cosine: float   # cosine of the fed vector to the emitted token's embedding
    norm: float             # |fed vector|, as the model receives it
    emitted_norm: float     # |the emitted token's embedding|, the same way
    participation: float    # 1 / sum w^2: how many tokens are really mixed (1 for an id); nan for a hidden state
    entropy: float          # of softmax(logits / T), untruncated, nats: what Cold Stop reads
    low_steps: int          # Cold Stop's count of low-entropy steps in a row, this one included (0: no Cold Stop)
    cold_stop: bool         # Cold Stop fired at this step: from here on the rule feeds ids
    rule_seconds: float     # forming the fed vector: the rule alone, without the forward pass or these measures


@dataclass(frozen=True)
class KVStep:
    """The KV cache after this step. rows/bytes are read off the real cache tensors;
    paged_* is the accounting of a shared-prefix cache (blocks of 16, ref-counted)."""
    rows: int            # token rows held, summed over beams
    bytes: int
    rows_appended: int
    rows_copied: int     # rows moved into a slot by a beam reorder
    paged_rows: int      # distinct rows a shared-prefix cache would hold
    paged_blocks: int
    paged_bytes: int     # blocks * block_size * bytes per row
    beam_rows: list      # rows per beam slot


@dataclass(frozen=True)
class StageToken:
    token_id: int
    text: str
    prob: float          # probability in the distribution the stage received


@dataclass(frozen=True)
class Stage:
    """The distribution after one stage of the sampler chain, in the order its engine applies them."""
    name: str            # one of config.STAGE_NAMES: repetition_penalty | temperature | top_k | top_p | min_p | ...
    value: float         # the setting (1.3, 0.7, 50, 0.9, 0.05)
    kept_count: int      # tokens still possible after this stage
    cut_count: int       # tokens this stage removed
    removed_mass: float  # probability mass, in the distribution it received, of the tokens it removed
    probs: list          # renormalised probability of each of the step's candidates, in their order
    top_id: int          # top-1 token after this stage
    top_text: str
    top_prob: float
    cut: list = field(default_factory=list)   # [StageToken] the first tokens it removed, in rank order
    # a stateful stage's state at this step, plain numbers and booleans (STAGE_STATE_KEYS says which keys):
    # mirostat {"mu", "mu_next"}, xtc {"draw", "fired"}, dry {"run", "penalised"}, temperature {"temperature"}
    # (dynamic), penalties {"window"}; {} for a stateless stage
    state: dict = field(default_factory=dict)


@dataclass(frozen=True)
class GrammarStep:
    """What a grammar's mask did at one step (constrained decoding)."""
    allowed: int         # tokens the grammar allowed next, of the vocabulary
    feasible_mass: float # Z_t: probability the model gave the allowed tokens before the mask
    forced: bool         # exactly one token allowed: the grammar, not the model, chose it
    accepting: bool      # after this step's token the text is a whole match (the grammar may end)
    removed: list        # [StageToken] the most likely tokens the mask removed, with their probabilities
    mask: str            # the allowed set: one bit per token, zlib-compressed, base64


@dataclass(frozen=True)
class Step:
    index: int                      # 0 = the first generated token
    candidates: list                # [Candidate] top-N, for beams: of the best running beam
    entropy: float                  # raw distribution, nats
    shaped_entropy: float
    removed_mass: float             # raw mass of tokens the strategy cut
    kept_count: int                 # tokens with shaped prob > 0
    chosen_ids: list                # one id, or one per beam kept
    chosen_texts: list
    feedback: FeedBack | None = None
    kv: KVStep | None = None
    beam_node_ids: list = field(default_factory=list)   # running beams' node ids after this step
    seconds: float = 0.0            # wall time of this step's forward pass and choice
    stages: list = field(default_factory=list)          # [Stage] one per processor; empty in older traces
    grammar: GrammarStep | None = None                   # constrained decoding: what the grammar's mask did
    varentropy: float = math.nan    # raw distribution: Var[-log p], nats^2 (nan: not known, as in older traces)
    # the feed-back rules of engine.soft_inputs: the fed vector's tokens and weights, most weight first (at most
    # 20; the rest of a full p^T E is left out), the token emitted as text, and the step's measures
    fed_ids: list = field(default_factory=list)
    fed_weights: list = field(default_factory=list)
    emitted_id: int | None = None
    fed: FedInput | None = None

    @property
    def chosen(self) -> "Candidate | None":
        """The candidate record of the (first) chosen token, when it is among the recorded candidates."""
        if not self.chosen_ids:
            return None
        return next((c for c in self.candidates if c.token_id == self.chosen_ids[0]), None)


@dataclass(frozen=True)
class Node:
    """A beam-search expansion: one of the 2*num_beams continuations the search ranked."""
    id: int
    parent: int | None              # None for the root (the prompt)
    step: int                       # -1 for the root
    token_id: int
    text: str
    logprob: float                  # step logprob of this token
    cum_logprob: float
    score: float                    # cum_logprob / length ** length_penalty
    length: int                     # generated tokens up to and including this one
    status: str                     # root | kept | pruned | finished
    beam: int                       # slot of the parent beam
    rank: int                       # rank among this step's continuations (1 = best)


@dataclass(frozen=True)
class Sequence:
    token_ids: list                 # generated tokens only
    text: str
    cum_logprob: float
    score: float
    node_id: int | None = None      # leaf in the beam tree




@dataclass(frozen=True)
class PairProb:
    """One token's probability under the target (p) and under the draft (q) at one position."""
    token_id: int
    text: str
    p: float
    q: float


@dataclass(frozen=True)
class DraftCheck:
    """One drafted token and the target's check of it (speculative decoding)."""
    token_id: int
    text: str
    q: float              # the draft's probability of it (1 for a prompt-lookup draft: it has no distribution)
    p: float              # the target's probability of it at the same position
    u: float | None       # the uniform draw, kept when u <= p / q (sampling); None when greedy compares ids
    status: str           # kept | rejected | unchecked (after a rejection, or after an end-of-text)
    candidates: list = field(default_factory=list)   # [PairProb] top tokens of p and of q (checked positions)
    residual: list = field(default_factory=list)     # [StageToken] top of norm(max(0, p - q)), at a rejection
    residual_mass: float = 0.0                       # sum of max(0, p - q) = TV(p, q); 1 - it is the keep chance


@dataclass(frozen=True)
class Round:
    """One round of speculative decoding: K drafted tokens, one target pass that checks them all, and the
    target's own token after the kept ones (corrected at a rejection, a bonus when all were kept)."""
    index: int
    first_step: int                # the step of the round's first emitted token
    drafts: list                   # [DraftCheck]
    next_id: int | None            # the target's own token; None when the round ended at a kept end-of-text
    next_text: str
    next_kind: str                 # corrected | bonus | none
    next_candidates: list          # [PairProb] p (and q, 0 after the last draft) where that token was drawn
    target_passes: int
    draft_passes: int
    seconds: float = 0.0

    @property
    def kept(self) -> int:
        return sum(1 for d in self.drafts if d.status == "kept")

    @property
    def emitted_ids(self) -> list:
        ids = [d.token_id for d in self.drafts if d.status == "kept"]
        return ids + ([self.next_id] if self.next_id is not None else [])
