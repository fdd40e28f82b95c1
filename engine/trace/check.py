"""Consistency of a trace read from a file: every index in range, every parent present, lengths agreeing.

`trace.py` turns JSON into typed records and rejects wrong types; this module checks how the
records fit together, so that a page can index `step.chosen_ids[0]`, walk a beam path to the
root or take `exp(logprob)` without meeting a missing id, a cycle or an overflow. It also
bounds the work one file can cause: at most `max_new_tokens` steps, `top_n` (+1) candidates
per step and `2 * num_beams` tree nodes per step.

`check(trace)` raises TraceFormatError naming the first problem ("step 4: chosen token 999999
is outside the vocabulary of 49,152"). Steps, candidates, stages, sequences and their tokens are
counted from 1, as every page and the CLI count them; a node is named by its id, as the file
names it.

The checks are written out here rather than in a schema library: nearly all of them relate one
part of the file to another (a parent one step before its child, a sequence equal to its beam
path, ids below the file's own vocabulary size), which a JSON schema cannot say.
"""
from __future__ import annotations

import math
import re

from ..config import (LLAMA_CPP_SAMPLERS, MAX_BEAMS, MAX_DRAFT_TOKENS, MAX_TOP_N, MAX_VOCAB, SOFT_INPUT_STRATEGIES,
                      STAGE_NAMES, STAGE_STATE_KEYS, cold_stop_spec)
from ..errors import TraceFormatError, quoted
from ..served.numbers import LEARNT, NUMBERS
from .mask import allowed_count, allows, packed_mask

TOLERANCE = 1e-3           # float32 rounding: a probability of 1.0000001, an entropy of -1e-7
MAX_TOKEN_ID = 2**31 - 1   # when the file does not say its vocabulary size
MAX_PROMPT_TOKENS = 32_768 # when the file does not say its context length; pages loop over the prompt
MAX_PROMPT_CLAIM = 131_072 # whatever context length the file claims: the longest prompt a file may hold
MAX_GRAMMAR_REMOVED = 10   # the recorder keeps the 10 most likely tokens a grammar removed
MAX_STAGE_CUT = 20         # the recorder keeps the first 20 tokens a stage removed
MAX_STAGES = 2 * len(LLAMA_CPP_SAMPLERS) + 1   # a custom llama.cpp list may name a sampler twice; and a grammar
STATUSES = ("kept", "pruned", "finished")
DRAFT_STATUSES = ("kept", "rejected", "unchecked")
NEXT_KINDS = ("corrected", "bonus", "none")
MAX_PAIRS = 2 * MAX_TOP_N + 1   # a position lists the top tokens of p and of q, and its own token
MAX_RESIDUAL = 20               # the recorder keeps the residual's first 20 tokens
MAX_FED = 20                    # the recorder keeps a fed vector's 20 heaviest tokens
FED_KINDS = ("mixture", "id", "hidden")

# model_facts keys the pages read, and the type each must have
FACT_TYPES = {"name": str, "architecture": str, "dtype": str, "has_chat_template": bool,
              "parameters": int, "vocab_size": int, "layers": int, "hidden_size": int, "heads": int,
              "kv_heads": int, "head_dim": int, "dtype_bytes": int, "context_length": int,
              "kv_bytes_per_token": int}
# model_facts["served"] keys the pages and the CLI read: type, and the values allowed (or the longest text)
SERVED_TYPES = {"server": (str, 40), "url": (str, 2_000), "top_n": (int, MAX_TOP_N), "exact": (bool, None),
                "text_ids_from": (int, MAX_TOKEN_ID), "logprobs": (str, NUMBERS), "logprobs_from": (str, LEARNT)}


class _Problem(Exception):
    """The first inconsistency found; its message names where it is."""


def check(trace) -> None:
    """Raise TraceFormatError naming the first inconsistency in `trace`; return None when it is whole."""
    try:
        _Checker(trace).run()
    except _Problem as exc:
        raise TraceFormatError(f"trace is inconsistent: {exc}") from None


def _fail(message: str):
    raise _Problem(message)


class _Checker:
    def __init__(self, trace):
        self.trace = trace
        self.config = trace.config
        self.beam = trace.config.strategy == "beam"
        self.vocab = None

    def run(self) -> None:
        self.facts()
        self.schema()
        prompt = self.trace.prompt_token_ids
        most = min(self.trace.model_facts.get("context_length") or MAX_PROMPT_TOKENS, MAX_PROMPT_CLAIM)
        if len(prompt) > most:
            _fail(f"its prompt has {len(prompt):,} tokens, more than the {most:,} a model reads at once")
        for i, token_id in enumerate(prompt):
            self.token(token_id, f"prompt token {i + 1}", "id")
        self.steps()
        self.nodes()
        self.sequences()
        self.forced()
        self.rounds()

    # ---- pieces ------------------------------------------------------------------
    def facts(self) -> None:
        for key, kind in FACT_TYPES.items():
            value = self.trace.model_facts.get(key)
            if value is None:
                continue
            if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                _fail(f"model fact '{key}' must be a whole number of at least 0, got {quoted(value)}")
            if kind is not int and not isinstance(value, kind):
                _fail(f"model fact '{key}' must be {'text' if kind is str else 'true or false'}, got {quoted(value)}")
        self.served()
        vocab = self.trace.model_facts.get("vocab_size")
        if vocab is not None:
            if not 1 <= vocab <= MAX_VOCAB:       # masks and counts are sized by it: bound it before any is read
                _fail(f"model fact 'vocab_size' is {vocab:,}; a vocabulary has 1 to {MAX_VOCAB:,} tokens")
            self.vocab = vocab

    def schema(self) -> None:
        """A file's JSON schema read as the CLI and the page read one (nesting, true/false, references outside
        it): a page checks the file's output against it, and nothing it names may be fetched."""
        if self.config.grammar_kind != "json_schema":
            return
        from ..errors import ConfigError
        from engine.grammar.json_schema import parse_schema

        try:
            parse_schema(self.config.grammar)
        except ConfigError as exc:
            _fail(f"its {exc}")

    def served(self) -> None:
        """A served trace's facts: each key the pages read of its type and within its bounds; a trace from
        before the server's numbers were recorded (no 'logprobs') still reads, as numbers of unknown kind."""
        served = self.trace.model_facts.get("served")
        if served is None:
            return
        if not isinstance(served, dict):
            _fail(f"model fact 'served' must be an object, got {quoted(served)}")
        for key, (kind, bound) in SERVED_TYPES.items():
            value = served.get(key)
            if value is None:
                continue
            where = f"model fact 'served.{key}'"
            if kind is int:
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= bound:
                    _fail(f"{where} must be a whole number from 0 to {bound:,}, got {quoted(value)}")
            elif not isinstance(value, kind):
                _fail(f"{where} must be {'text' if kind is str else 'true or false'}, got {quoted(value)}")
            elif isinstance(bound, tuple) and value not in bound:
                _fail(f"{where} must be one of {', '.join(bound)}, got {quoted(value)}")
            elif isinstance(bound, int) and kind is str and len(value) > bound:
                _fail(f"{where} is {len(value):,} characters; the limit is {bound:,}")

    def token(self, token_id: int, where: str, what: str = "token") -> None:
        if self.vocab is not None:
            if not 0 <= token_id < self.vocab:
                _fail(f"{where}: {what} {token_id} is outside the vocabulary of {self.vocab:,}")
        elif not 0 <= token_id <= MAX_TOKEN_ID:
            _fail(f"{where}: {what} {token_id} is not a token id (0 to {MAX_TOKEN_ID:,})")

    def steps(self) -> None:
        steps, config = self.trace.steps, self.config
        if not steps:
            _fail("it has no steps")
        if len(steps) > config.max_new_tokens:
            _fail(f"it has {len(steps):,} steps but its max_new_tokens is {config.max_new_tokens:,}")
        most_candidates = config.top_n + 1          # the top-N, plus the chosen token when ranked below them
        most_chosen = config.num_beams if self.beam else 1
        for i, step in enumerate(steps):
            where = f"step {i + 1}"
            if step.index != i:
                _fail(f"{where}: its index is {step.index}; the file numbers steps 0, 1, 2, ... in order")
            if not step.candidates:
                _fail(f"{where}: it has no candidates")
            if len(step.candidates) > most_candidates:
                _fail(f"{where}: it has {len(step.candidates):,} candidates; top_n {config.top_n} allows "
                      f"{most_candidates}")
            seen = set()
            for j, cand in enumerate(step.candidates):
                self.candidate(cand, f"{where}, candidate {j + 1}")
                if cand.token_id in seen:
                    _fail(f"{where}, candidate {j + 1}: token {cand.token_id} is listed twice")
                seen.add(cand.token_id)
            for name in ("entropy", "shaped_entropy"):
                _at_least(getattr(step, name), 0.0, where, name)
            if not math.isnan(step.varentropy):
                _at_least(step.varentropy, 0.0, where, "varentropy")
            _share(step.removed_mass, where, "removed_mass")
            if step.kept_count < 0 or (self.vocab is not None and step.kept_count > self.vocab):
                _fail(f"{where}: kept_count {step.kept_count:,} is not between 0 and the vocabulary size")
            if not 1 <= len(step.chosen_ids) <= most_chosen:
                _fail(f"{where}: it has {len(step.chosen_ids)} chosen tokens; expected "
                      f"{'1 to ' + str(most_chosen) if self.beam else 'exactly 1'}")
            if len(step.chosen_texts) != len(step.chosen_ids):
                _fail(f"{where}: {len(step.chosen_ids)} chosen tokens but {len(step.chosen_texts)} chosen texts")
            for token_id in step.chosen_ids:
                self.token(token_id, where, "chosen token")
            if len(step.beam_node_ids) > max(config.num_beams, 1):
                _fail(f"{where}: {len(step.beam_node_ids)} running beams, more than num_beams {config.num_beams}")
            _at_least(step.seconds, 0.0, where, "seconds")
            if step.feedback is not None:
                self.feedback(step.feedback, f"{where}, feedback")
            if step.kv is not None:
                self.kv(step.kv, f"{where}, kv")
            self.fed(step, where)
            if len(step.stages) > MAX_STAGES:
                _fail(f"{where}: {len(step.stages)} stages; a chain has at most {MAX_STAGES}")
            for k, stage in enumerate(step.stages):
                self.stage(stage, len(step.candidates), f"{where}, stage {k + 1}")
            if step.grammar is not None:
                self.grammar(step, f"{where}, grammar")

    def stage(self, stage, candidates: int, where: str) -> None:
        """One sampler stage: counts within the vocabulary, shares in [0, 1], one prob per candidate."""
        if stage.name not in STAGE_NAMES:
            _fail(f"{where}: '{stage.name[:40]}' is not one of {', '.join(STAGE_NAMES)}")
        _finite(stage.value, where, "value")
        for name in ("kept_count", "cut_count"):
            count = getattr(stage, name)
            if count < 0 or (self.vocab is not None and count > self.vocab):
                _fail(f"{where}: {name} {count:,} is not between 0 and the vocabulary size")
        _share(stage.removed_mass, where, "removed_mass")
        _share(stage.top_prob, where, "top_prob")
        self.token(stage.top_id, where, "top token")
        if len(stage.probs) != candidates:
            _fail(f"{where}: {len(stage.probs):,} probs for the step's {candidates} candidates")
        for p in stage.probs:
            _share(p, where, "each prob")
        if len(stage.cut) > MAX_STAGE_CUT:
            _fail(f"{where}: {len(stage.cut):,} cut tokens listed, more than {MAX_STAGE_CUT}")
        for j, token in enumerate(stage.cut):
            self.token(token.token_id, f"{where}, cut token {j + 1}")
            _share(token.prob, f"{where}, cut token {j + 1}", "prob")
        self.stage_state(stage, where)

    def stage_state(self, stage, where: str) -> None:
        """A stateful stage's state: only the entries its stage records, each of its kind and within bounds."""
        allowed = STAGE_STATE_KEYS.get(stage.name, {})
        for key, value in stage.state.items():
            if key not in allowed:
                _fail(f"{where}: a {stage.name} stage records no state '{key[:20]}'"
                      + (f" (it records {', '.join(allowed)})" if allowed else ""))
            bounds = allowed[key]
            if bounds is None:
                if not isinstance(value, bool):
                    _fail(f"{where}: state '{key}' must be true or false, got {quoted(value)}")
                continue
            if isinstance(value, bool):
                _fail(f"{where}: state '{key}' must be a number, got {quoted(value)}")
            _finite(value, where, f"state '{key}'")
            low, high = bounds
            if isinstance(low, int) and value != int(value):
                _fail(f"{where}: state '{key}' must be a whole number, got {value:g}")
            if not low <= value <= high:
                _fail(f"{where}: state '{key}' must be between {low:g} and {high:g}, got {value:g}")

    def grammar(self, step, where: str) -> None:
        """A grammar's step: a mask of exactly the vocabulary's size holding `allowed` tokens, the chosen
        token among them (one sequence), the removed tokens outside it."""
        g = step.grammar
        if not self.config.grammar_kind:
            _fail(f"{where}: the step has a grammar's mask but the config has no grammar")
        if self.vocab is None:
            _fail(f"{where}: a grammar's mask needs the model fact 'vocab_size'")
        try:
            allowed = packed_mask(g.mask, self.vocab)
        except ValueError as exc:
            _fail(f"{where}: {exc}")
        count = allowed_count(allowed)
        if g.allowed != count:
            _fail(f"{where}: it says {g.allowed:,} tokens allowed; its mask allows {count:,}")
        if count < 1:
            _fail(f"{where}: its mask allows no token")
        if g.forced != (count == 1):
            _fail(f"{where}: 'forced' must be true exactly when one token is allowed")
        _share(g.feasible_mass, where, "feasible_mass")
        if not self.beam and not allows(allowed, step.chosen_ids[0]):
            _fail(f"{where}: the chosen token {step.chosen_ids[0]} is not one the mask allows")
        if len(g.removed) > MAX_GRAMMAR_REMOVED:
            _fail(f"{where}: {len(g.removed):,} removed tokens listed, more than {MAX_GRAMMAR_REMOVED}")
        for j, token in enumerate(g.removed):
            self.token(token.token_id, f"{where}, removed token {j + 1}")
            _share(token.prob, f"{where}, removed token {j + 1}", "prob")
            if allows(allowed, token.token_id):
                _fail(f"{where}, removed token {j + 1}: token {token.token_id} is one the mask allows")

    def candidate(self, cand, where: str) -> None:
        self.token(cand.token_id, where)
        if cand.rank < 1 or (self.vocab is not None and cand.rank > self.vocab):
            _fail(f"{where}: rank {cand.rank:,} is not between 1 and the vocabulary size")
        _share(cand.prob, where, "prob")
        _share(cand.shaped_prob, where, "shaped_prob")
        _logprob(cand.logprob, where, "logprob")
        if math.isinf(cand.logit) and cand.logit > 0:
            _fail(f"{where}: logit must be a finite number")

    def feedback(self, fb, where: str) -> None:
        for name in ("nearest", "weights"):
            items = getattr(fb, name)
            if len(items) > MAX_TOP_N:
                _fail(f"{where}: {len(items):,} {name}, more than {MAX_TOP_N}")
            for j, item in enumerate(items):
                self.token(item.token_id, f"{where}, {name} {j + 1}")
                _finite(item.value, f"{where}, {name} {j + 1}", "value")
        self.token(fb.argmax_id, where, "argmax token")
        for name in ("nearest_cosine", "entropy", "norm", "nearest_norm"):
            _finite(getattr(fb, name), where, name)

    def fed(self, step, where: str) -> None:
        """A feed-back rule's step (engine.soft_inputs): the emitted token is the chosen one; the fed tokens are
        distinct, in the vocabulary, with weights in [0, 1], most weight first, summing to at most 1; the
        measures finite and in their ranges. Other strategies record none of it."""
        strategy = self.config.strategy
        if strategy not in SOFT_INPUT_STRATEGIES:
            if step.fed_ids or step.fed_weights or step.emitted_id is not None or step.fed is not None:
                _fail(f"{where}: it records a fed input, which only {', '.join(SOFT_INPUT_STRATEGIES)} record; "
                      f"its config says {strategy}")
            return
        if step.emitted_id is None or step.fed is None:
            _fail(f"{where}: a {strategy} step records its emitted_id and its fed input; one is missing")
        if step.emitted_id != step.chosen_ids[0]:
            _fail(f"{where}: emitted_id {step.emitted_id} is not the chosen token {step.chosen_ids[0]}")
        ids, weights, fed = step.fed_ids, step.fed_weights, step.fed
        if len(ids) != len(weights):
            _fail(f"{where}: {len(ids):,} fed_ids but {len(weights):,} fed_weights")
        if len(ids) > MAX_FED:
            _fail(f"{where}: {len(ids):,} fed tokens listed, more than {MAX_FED}")
        for j, token_id in enumerate(ids):
            self.token(token_id, f"{where}, fed token {j + 1}")
        if len(set(ids)) != len(ids):
            _fail(f"{where}: a fed token is listed twice")
        for j, weight in enumerate(weights):
            _share(weight, f"{where}, fed token {j + 1}", "weight")
            if j and weight > weights[j - 1] + TOLERANCE:
                _fail(f"{where}: fed_weights must come most weight first; weight {j + 1} is above weight {j}")
        if sum(weights) > 1 + TOLERANCE:
            _fail(f"{where}: fed_weights sum to {sum(weights):g}, more than 1")
        if fed.kind not in FED_KINDS:
            _fail(f"{where}: fed kind '{fed.kind[:20]}' is not one of {', '.join(FED_KINDS)}")
        if (fed.kind == "hidden") != (not ids):
            _fail(f"{where}: a fed hidden state lists no tokens, and a fed mixture or id lists at least one")
        if fed.kind == "id" and (len(ids) != 1 or abs(weights[0] - 1) > TOLERANCE):
            _fail(f"{where}: a fed id is one token of weight 1")
        if len(fed.nearest) > MAX_TOP_N:
            _fail(f"{where}: {len(fed.nearest):,} nearest tokens, more than {MAX_TOP_N}")
        for j, item in enumerate(fed.nearest):
            self.token(item.token_id, f"{where}, nearest {j + 1}")
            _cosine(item.value, f"{where}, nearest {j + 1}", "cosine")
        _cosine(fed.emitted_cosine, where, "emitted_cosine")
        for name in ("norm", "emitted_norm", "entropy", "rule_seconds"):
            _at_least(getattr(fed, name), 0.0, where, name)
        if math.isnan(fed.participation):
            if fed.kind != "hidden":
                _fail(f"{where}: participation is unknown, which only a fed hidden state may be")
        elif not 1 - TOLERANCE <= fed.participation <= (self.vocab or MAX_TOKEN_ID) + TOLERANCE:
            _fail(f"{where}: participation {fed.participation:g} is not between 1 and the vocabulary size")
        cold = cold_stop_spec(self.config.cold_stop) if strategy == "soft-thinking" else None
        most = cold[1] if cold else 0
        if not 0 <= fed.low_steps <= min(most, step.index + 1):
            _fail(f"{where}: low_steps {fed.low_steps:,} is not between 0 and {min(most, step.index + 1):,} "
                  "(the steps so far, at most Cold Stop's L)")
        if fed.cold_stop and fed.low_steps != most:
            _fail(f"{where}: Cold Stop fires only at its L-th low-entropy step in a row")

    def kv(self, kv, where: str) -> None:
        for name in ("rows", "bytes", "rows_appended", "rows_copied", "paged_rows", "paged_blocks", "paged_bytes"):
            if getattr(kv, name) < 0:
                _fail(f"{where}: {name} must be at least 0, got {getattr(kv, name)}")
        if len(kv.beam_rows) > MAX_BEAMS or any(rows < 0 for rows in kv.beam_rows):
            _fail(f"{where}: beam_rows must be at most {MAX_BEAMS} counts of at least 0")

    def nodes(self) -> None:
        """The beam tree: one root, unique ids, each parent one step before its child (so no cycle)."""
        nodes, steps = self.trace.nodes, self.trace.steps
        if not nodes:
            for i, step in enumerate(steps):
                if step.beam_node_ids:
                    _fail(f"step {i + 1}: running beam node {step.beam_node_ids[0]} but the trace has no beam tree")
            return
        most = 1 + len(steps) * 2 * max(self.config.num_beams, 1)
        if len(nodes) > most:
            _fail(f"the beam tree has {len(nodes):,} nodes; {len(steps)} steps of {self.config.num_beams} beams "
                  f"make at most {most:,}")
        self.by_id = {}
        for k, node in enumerate(nodes):
            if node.id in self.by_id:
                _fail(f"node {k}: id {node.id} is used twice")
            self.by_id[node.id] = node
        roots = [n for n in nodes if n.parent is None]
        if len(roots) != 1:
            _fail(f"the beam tree has {len(roots)} roots (nodes without a parent); it needs exactly 1")
        if roots[0].step != -1:
            _fail(f"node {roots[0].id}: the root must have 'step' -1, got {roots[0].step}")
        for node in nodes:
            if node.parent is None:
                continue
            where = f"node {node.id}"
            if not 0 <= node.step < len(steps):
                _fail(f"{where}: its 'step' {node.step} is outside the file's steps 0..{len(steps) - 1}")
            parent = self.by_id.get(node.parent)
            if parent is None:
                _fail(f"{where}: its parent {node.parent} is not in the tree")
            if parent.step != node.step - 1:
                _fail(f"{where}: its parent {node.parent} has 'step' {parent.step}, not {node.step - 1} "
                      "(a parent comes one step before its child)")
            self.token(node.token_id, where)
            if node.status not in STATUSES:
                _fail(f"{where}: status {quoted(node.status)} is not one of {', '.join(STATUSES)}")
            if not 0 <= node.beam < max(self.config.num_beams, 1):
                _fail(f"{where}: its 'beam' {node.beam} is outside 0..{self.config.num_beams - 1}")
            if node.rank < 1:
                _fail(f"{where}: rank must be at least 1, got {node.rank}")
            if not 1 <= node.length <= node.step + 1:      # a hypothesis at file step s has at most s + 1 tokens
                _fail(f"{where}: length must be between 1 and {node.step + 1}, got {node.length:,}")
            _logprob(node.logprob, where, "logprob")
            _logprob(node.cum_logprob, where, "cum_logprob")
        for i, step in enumerate(steps):
            for node_id in step.beam_node_ids:
                if node_id not in self.by_id:
                    _fail(f"step {i + 1}: running beam node {node_id} is not in the tree")

    def sequences(self) -> None:
        trace = self.trace
        if not trace.sequences:
            _fail("it has no sequences")
        most = max(self.config.num_beams, 1) if self.beam else 1
        if len(trace.sequences) > most:
            _fail(f"it has {len(trace.sequences)} sequences; {self.config.strategy} returns at most {most}")
        for k, seq in enumerate(trace.sequences):
            where = f"sequence {k + 1}"
            for i, token_id in enumerate(seq.token_ids):
                self.token(token_id, f"{where}, token {i + 1}", "id")
            _logprob(seq.cum_logprob, where, "cum_logprob")
            if trace.nodes and seq.node_id is not None:
                path = self.path(seq.node_id, where)
                if [n.token_id for n in path] != list(seq.token_ids):
                    _fail(f"{where}: its {len(seq.token_ids)} tokens are not the {len(path)} tokens on the beam "
                          f"path to node {seq.node_id}")
            elif seq.node_id is not None:
                _fail(f"{where}: it names node {seq.node_id} but the trace has no beam tree")
            else:
                chosen = [s.chosen_ids[0] for s in trace.steps]
                if len(seq.token_ids) != len(chosen):
                    _fail(f"{where}: it has {len(seq.token_ids)} tokens but the trace has {len(chosen)} steps")
                for i, (token_id, step_id) in enumerate(zip(seq.token_ids, chosen)):
                    if token_id != step_id:
                        _fail(f"{where}, token {i + 1}: it is {token_id} but step {i + 1} chose {step_id}")

    def path(self, node_id: int, where: str) -> list:
        node = self.by_id.get(node_id)
        if node is None:
            _fail(f"{where}: its node {node_id} is not in the beam tree")
        path = []
        while node.parent is not None:          # steps fall by one per parent (checked), so this ends
            path.append(node)
            node = self.by_id[node.parent]
        return path[::-1]

    def forced(self) -> None:
        for step, token_id in self.trace.forced.items():
            if not 0 <= step < self.config.max_new_tokens:
                _fail(f"forced token at step {step + 1}: the step is outside 1..{self.config.max_new_tokens}")
            self.token(token_id, f"forced token at step {step + 1}")


    def rounds(self) -> None:
        """Speculative rounds: each within K drafts, kept ones first, the test u <= p / q as recorded, and the
        tokens they emit, in order, exactly the steps' chosen tokens."""
        rounds, steps = self.trace.rounds, self.trace.steps
        if not rounds:
            return
        if self.config.strategy != "speculative":
            _fail(f"it has {len(rounds):,} speculative rounds but its strategy is {self.config.strategy}")
        if len(rounds) > len(steps):
            _fail(f"it has {len(rounds):,} rounds for {len(steps):,} steps; every round emits a token")
        most = min(self.config.draft_tokens, MAX_DRAFT_TOKENS)
        emitted = []
        for r, rnd in enumerate(rounds):
            where = f"round {r + 1}"
            if rnd.index != r:
                _fail(f"{where}: its index is {rnd.index}; the file numbers rounds 0, 1, 2, ... in order")
            if rnd.first_step != len(emitted):
                _fail(f"{where}: it starts at step {rnd.first_step + 1}, but the rounds before it emitted "
                      f"{len(emitted)} tokens")
            if len(rnd.drafts) > most:
                _fail(f"{where}: {len(rnd.drafts)} drafted tokens; draft_tokens is {self.config.draft_tokens}")
            self.round_drafts(rnd, where)
            if rnd.next_kind not in NEXT_KINDS:
                _fail(f"{where}: next_kind '{rnd.next_kind[:40]}' is not one of {', '.join(NEXT_KINDS)}")
            rejected = any(d.status == "rejected" for d in rnd.drafts)
            expected = "none" if rnd.next_id is None else "corrected" if rejected else "bonus"
            if rnd.next_kind != expected:
                _fail(f"{where}: its next token is marked {rnd.next_kind}, but the drafts say {expected}")
            if rnd.next_id is not None:
                self.token(rnd.next_id, where, "next token")
            self.pairs(rnd.next_candidates, f"{where}, next token")
            if not 0 <= rnd.target_passes <= 1 + most or not 0 <= rnd.draft_passes <= 1 + most:
                _fail(f"{where}: {rnd.target_passes} target and {rnd.draft_passes} draft passes; a round of "
                      f"{most} drafts takes at most {1 + most} of each")
            _at_least(rnd.seconds, 0.0, where, "seconds")
            if not rnd.emitted_ids:
                _fail(f"{where}: it emits no token")
            emitted += rnd.emitted_ids
        chosen = [s.chosen_ids[0] for s in steps]
        if emitted != chosen:
            at = next((i for i, (a, b) in enumerate(zip(emitted, chosen)) if a != b), min(len(emitted), len(chosen)))
            _fail(f"the rounds emit {len(emitted)} tokens that are not the {len(chosen)} tokens of the steps "
                  f"(they part at step {at + 1})")

    def round_drafts(self, rnd, where: str) -> None:
        order = "".join({"kept": "k", "rejected": "r", "unchecked": "u"}.get(d.status, "?") for d in rnd.drafts)
        for j, draft in enumerate(rnd.drafts):
            at = f"{where}, draft {j + 1}"
            if draft.status not in DRAFT_STATUSES:
                _fail(f"{at}: status '{draft.status[:40]}' is not one of {', '.join(DRAFT_STATUSES)}")
            self.token(draft.token_id, at)
            _share(draft.p, at, "p")
            _share(draft.q, at, "q")
            _share(draft.residual_mass, at, "residual_mass")
            if draft.u is not None and draft.status != "unchecked":
                _share(draft.u, at, "u")
                kept = draft.u <= draft.p / draft.q if draft.q > 0 else True
                if kept != (draft.status == "kept"):
                    _fail(f"{at}: it is marked {draft.status}, but u {draft.u:.6g} "
                          f"{'<=' if kept else '>'} p/q {draft.p:.6g}/{draft.q:.6g}")
            self.pairs(draft.candidates, at)
            if len(draft.residual) > MAX_RESIDUAL:
                _fail(f"{at}: {len(draft.residual):,} residual tokens listed, more than {MAX_RESIDUAL}")
            for k, token in enumerate(draft.residual):
                self.token(token.token_id, f"{at}, residual token {k + 1}")
                _share(token.prob, f"{at}, residual token {k + 1}", "prob")
        if not re.fullmatch("k*r?u*", order):
            _fail(f"{where}: drafts must be kept, then at most one rejected, then unchecked; got {order}")

    def pairs(self, pairs, where: str) -> None:
        if len(pairs) > MAX_PAIRS:
            _fail(f"{where}: {len(pairs):,} candidates, more than {MAX_PAIRS}")
        for k, pair in enumerate(pairs):
            self.token(pair.token_id, f"{where}, candidate {k + 1}")
            _share(pair.p, f"{where}, candidate {k + 1}", "p")
            _share(pair.q, f"{where}, candidate {k + 1}", "q")


# ---- numbers ---------------------------------------------------------------------------
def _finite(value: float, where: str, name: str) -> None:
    if not math.isfinite(value):
        _fail(f"{where}: {name} must be a finite number, got {value}")


def _at_least(value: float, low: float, where: str, name: str) -> None:
    _finite(value, where, name)
    if value < low - TOLERANCE:
        _fail(f"{where}: {name} must be at least {low:g}, got {value:g}")


def _cosine(value: float, where: str, name: str) -> None:
    _finite(value, where, name)
    if not -1 - TOLERANCE <= value <= 1 + TOLERANCE:
        _fail(f"{where}: {name} must be between -1 and 1, got {value:g}")


def _share(value: float, where: str, name: str) -> None:
    """A probability or a share of probability mass: in [0, 1]."""
    _finite(value, where, name)
    if not -TOLERANCE <= value <= 1 + TOLERANCE:
        _fail(f"{where}: {name} must be between 0 and 1, got {value:g}")


def _logprob(value: float, where: str, name: str) -> None:
    """A log-probability: at most 0, or -inf (written as null) for a token the strategy cut."""
    if math.isnan(value) or value > TOLERANCE:
        _fail(f"{where}: {name} must be 0 or less, got {value:g}")
