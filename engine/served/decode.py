"""Decoding on a served model: the same Trace as a local decode, built from a server's top-N logprobs.

What each strategy does there:
  - greedy and sample: one streamed request for the whole run (`max_tokens`, `logprobs` = top-N, and
    for sampling the server's own `seed`); the server chooses every token, we record each as it arrives;
  - beam: driven from here one step at a time: for each running beam, `max_tokens: 1` with
    `logprobs` of twice the beam count, then the same helpers as the local beam search rank the
    continuations (the server's prefix cache keeps each request cheap);
  - soft and gumbel feed a vector back, which a completions server cannot take: refused in one line.
Differences from a local trace, each said in `model_facts["served"]`: probabilities are exact
for the listed tokens only, the rest is one "other" mass; the shaped distribution is worked out
here from the top-N alone; token ids come from the server's tokenizer, or, for a text that is not
one token there, from a range above every real vocabulary (`text_ids_from`); and whether the server's
numbers are raw or come after its own sampler chain (`logprobs`, numbers.py): processed ones are shaped
already, so they are recorded as they came and not shaped again.
"""
from __future__ import annotations

import dataclasses
import math
import time

import torch

from engine.decoding.beam import (NEG, beam_score, early_stop_heuristic, has_unfinished_sequences,
                                  running_beams_for_next_iteration,
                   top_k_continuations, update_finished_beams)
from ..config import FEEDBACK_STRATEGIES, DecodeConfig
from engine.decoding.runner import versions
from .client import Server, ServedError, TopN, answers_checked
from .numbers import PROCESSED
from .samplers import server_fields
from engine.samplers.shaping import build_processors, entropy, shape
from ..trace import Candidate, Node, Sequence, Step, Trace

TEXT_IDS_FROM = 2**31 - 2**24     # ids for texts the server's tokenizer cannot name as one token


class TokenIds:
    """token text -> id: the server's own id where its tokenizer names the text as one token,
    else a stable id from TEXT_IDS_FROM up, so that a step never lists one id twice."""

    def __init__(self, server: Server):
        self.server, self._made = server, {}

    def __call__(self, text: str) -> int:
        found = self.server.token_id(text)
        if found is not None:
            return found
        return self._made.setdefault(text, TEXT_IDS_FROM + len(self._made))

    def known(self, text: str) -> int:
        """The id without asking the server (a provisional one where it is not known yet)."""
        found = self.server.known_token_id(text)
        if found is not None:
            return found
        return self._made.get(text, TEXT_IDS_FROM + 2**23 + hash(text) % 2**23)


def served_decode(server: Server, prompt: str, config: DecodeConfig, on_step=None) -> Trace:
    """Decode `prompt` on the server with `config`; the Trace records each step's top-N view.
    on_step(0, step) sees each step as it is recorded (tokens stream in; beam steps arrive one by one);
    returning False stops the decode, and the trace holds the steps so far."""
    config.validate()
    if config.strategy in FEEDBACK_STRATEGIES:
        raise ServedError(f"{config.strategy} decoding feeds a vector back into the model; a completions server "
                          "takes only text, so it runs on a local model only")
    if config.grammar_kind:
        raise ServedError("grammar: constrained decoding walks the grammar over the model's own logits at every "
                          "step, so it runs on a local model only")
    if not prompt:
        raise ServedError("prompt is empty; type some text for the model to continue")
    top_n = min(config.top_n, server.max_logprobs)
    names = TokenIds(server)
    t0 = time.perf_counter()
    prompt_ids = server.tokenize(prompt) or []

    def traced(steps, nodes, sequences) -> Trace:
        total = time.perf_counter() - t0
        listed = 2 * config.num_beams if config.strategy == "beam" else top_n    # each beam step lists 2 x B
        facts = server.facts(listed)
        facts["served"]["text_ids_from"] = TEXT_IDS_FROM
        return Trace(model=server.model, prompt=prompt, prompt_token_ids=prompt_ids,
                     config=config.replace(top_n=listed), steps=steps, sequences=sequences, nodes=nodes,
                     model_facts=facts, versions=versions(),
                     timings={"total_s": total, "decode_s": total,
                              "tokens_per_s": len(steps) / total if total else 0.0})

    with answers_checked(server):
        try:
            if config.strategy == "beam":
                steps, nodes, sequences = _beam(server, prompt, config, names, on_step)
            else:
                steps, sequences = _one_sequence(server, prompt, config, top_n, names, on_step)
                nodes = []
        except ServedError as exc:       # the steps recorded before the fault stay with it
            partial = getattr(exc, "partial", None)
            if partial is not None and partial[0]:
                exc.trace = traced(*partial)
            raise
    return traced(steps, nodes, sequences)


# ---- greedy and sample: the server decodes, we read -----------------------------------------
def _one_sequence(server: Server, prompt: str, config: DecodeConfig, top_n: int, names: TokenIds, on_step):
    """One streamed request: each token's step is recorded as it arrives; on_step returning False stops."""
    sampling = config.strategy == "sample"
    processed = server.numbers == PROCESSED
    tokens = server.stream(
        prompt, max_tokens=config.max_new_tokens, logprobs=top_n,
        temperature=config.temperature if sampling else 0.0,
        top_k=config.top_k if sampling else 0, top_p=config.top_p if sampling else 1.0,
        min_p=config.min_p if sampling else 0.0, repetition_penalty=config.repetition_penalty,
        seed=config.seed if sampling else None, samplers=server_fields(server.kind, config, sampling))
    steps, positions, seconds, t0 = [], [], [], time.perf_counter()
    try:
        for position in tokens:
            if len(steps) >= config.max_new_tokens:
                break
            now = time.perf_counter()
            # ids only from what is known already: a request to the server now would cut its stream short
            steps.append(step_from(position, len(steps), config, top_n, names.known, now - t0, processed))
            positions.append(position)
            seconds.append(now - t0)
            t0 = now
            if on_step is not None and on_step(0, steps[-1]) is False:
                break
    except ServedError as exc:         # the tokens so far, named without asking the faulty server again
        exc.partial = (steps, [], [_sequence(positions, steps)])
        raise
    finally:
        tokens.close()                 # a stop closes the connection; the server stops decoding
    steps = [step_from(p, i, config, top_n, names, s, processed) for i, (p, s) in enumerate(zip(positions, seconds))]
    return steps, [_sequence(positions, steps)]


def _sequence(positions: list, steps: list) -> Sequence:
    cum = sum(p.logprob for p in positions)
    return Sequence(token_ids=[step.chosen_ids[0] for step in steps], text="".join(p.text for p in positions),
                    cum_logprob=cum, score=cum)


def step_from(position: TopN, index: int, config: DecodeConfig, top_n: int, names: TokenIds,
              seconds: float = 0.0, processed: bool = False) -> Step:
    """One recorded step from a server's top-N: raw probabilities as reported, the shaped ones
    worked out over the listed tokens only (the "other" mass cannot be shaped: nothing names it).
    `processed`: the server reported its numbers after its own sampler chain (numbers.py); they are
    shaped already, so they are not shaped again, and the raw ones are not known."""
    pairs = list(position.top[:top_n])
    if position.text not in dict(pairs):
        pairs.append((position.text, position.logprob))
    logprobs = torch.tensor([lp for _, lp in pairs], dtype=torch.float64)
    probs = logprobs.exp()
    shaped = torch.softmax(logprobs, -1) if processed else _shaped(config, logprobs)
    candidates, seen = [], set()
    for rank, ((text, logprob), p, q) in enumerate(zip(pairs, probs.tolist(), shaped.tolist()), start=1):
        token_id = names(text)
        if token_id in seen:         # two texts the server's tokenizer maps to one id: keep the likelier
            continue
        seen.add(token_id)
        candidates.append(Candidate(token_id=token_id, text=text, logit=logprob, prob=p, logprob=logprob,
                                    rank=rank, shaped_prob=q, kept=q > 0))
    other = max(0.0, 1.0 - float(probs.sum()))
    listed_entropy = float(entropy(probs.float())) + (-other * math.log(other) if other > 0 else 0.0)
    return Step(index=index, candidates=candidates, entropy=listed_entropy,
                shaped_entropy=float(entropy(shaped.float())), removed_mass=float(probs[shaped == 0].sum()),
                kept_count=int((shaped > 0).sum()), chosen_ids=[names(position.text)],
                chosen_texts=[position.text], seconds=seconds)


def _shaped(config: DecodeConfig, logprobs: torch.Tensor) -> torch.Tensor:
    """The strategy's distribution over the listed tokens (repetition penalty left out: it needs the
    context's ids, and the server applied it already)."""
    processors = build_processors(config.replace(repetition_penalty=1.0))
    scores = shape(processors, torch.zeros(1, 0, dtype=torch.long), logprobs.float()[None])[0]
    return torch.softmax(scores.double(), -1)


# ---- beam search, driven from here -----------------------------------------------------------
def _beam(server: Server, prompt: str, config: DecodeConfig, names: TokenIds, on_step):
    """The local search's helpers (beam.py) over a [B, K] table of each beam's top-K continuations
    instead of [B, V]: a continuation outside a beam's top 2B can never be among the best 2B overall."""
    B = config.num_beams
    K = 2 * B
    if K > server.max_logprobs:
        raise ServedError(f"num_beams {B} needs the top {K} tokens per step; this server gives at most "
                          f"{server.max_logprobs} (start vLLM with --max-logprobs {K})")
    nodes = [Node(id=0, parent=None, step=-1, token_id=-1, text="", logprob=0.0, cum_logprob=0.0, score=0.0,
                  length=0, status="root", beam=0, rank=0)]
    running = [[] for _ in range(B)]          # token texts per running beam
    running_nodes = [0] * B
    running_scores = torch.full((B,), NEG)
    running_scores[0] = 0.0                   # only beam 0 expands at the first step
    done_scores, done_flags, done = torch.full((B,), NEG), torch.zeros(B, dtype=torch.bool), [None] * B
    can_improve, steps, stopped = True, [], False
    try:
        for t in range(config.max_new_tokens):
            t0 = time.perf_counter()
            table, texts, ends, views = _continuations(server, prompt, running, running_scores, t, K)
            top_scores, top_beam, top_col = top_k_continuations(table, K)
            reached_stop = torch.tensor([bool(ends[b, c]) or t + 1 >= config.max_new_tokens
                                 for b, c in zip(top_beam.tolist(), top_col.tolist())])
            pick, new_scores = running_beams_for_next_iteration(top_scores, reached_stop, B)
            length = t + 1
            merged, done_scores_new, done_flags_new, just_done = update_finished_beams(
                done_scores, done_flags, top_scores, reached_stop, length=length, length_penalty=config.length_penalty,
                early_stopping=config.early_stopping, can_improve=can_improve)
            entered = {i - B for i in merged.tolist() if i >= B and bool(just_done[i - B])}
            kept = set(pick.tolist())
            candidates = [(int(top_beam[pos]), texts[int(top_beam[pos])][int(top_col[pos])], float(top_scores[pos]))
                          for pos in range(K)]
            node_ids = _record_nodes(nodes, candidates, running_nodes, running_scores, kept=kept, entered=entered,
                                     step=t, config=config, names=names)
            continuations = [(running[int(top_beam[p])] + [texts[int(top_beam[p])][int(top_col[p])]],
                              float(top_scores[p]), node_ids[p]) for p in range(K)]
            done = [done[i] if i < B else (continuations[i - B] if (i - B) in entered else None)
                    for i in merged.tolist()]
            done_scores, done_flags = done_scores_new, done_flags_new
            best_parent, best_col = int(top_beam[pick[0]]), int(top_col[pick[0]])
            running = [continuations[p][0] for p in pick.tolist()]
            running_nodes = [node_ids[p] for p in pick.tolist()]
            running_scores = new_scores
            view = views[best_parent]       # the distribution shown: the one the new best beam extends
            best = view.top[best_col] if best_col < len(view.top) else (texts[best_parent][best_col], NEG)
            step = step_from(TopN(*best, top=view.top), t, config, K, names, time.perf_counter() - t0,
                             server.numbers == PROCESSED)
            step = dataclasses.replace(step, chosen_ids=[names(seq[-1]) for seq in running],
                                       chosen_texts=[seq[-1] for seq in running], beam_node_ids=list(running_nodes))
            steps.append(step)
            if on_step is not None and on_step(0, step) is False:
                stopped = True
            can_improve = early_stop_heuristic(can_improve, running_scores, done_scores, done_flags, cur_len=t + 1,
                                               max_length=config.max_new_tokens, prompt_len=0,
                                               early_stopping=config.early_stopping,
                                               length_penalty=config.length_penalty)
            if stopped or not has_unfinished_sequences(can_improve, done_flags, reached_stop, config.early_stopping):
                break
    except ServedError as exc:      # the search so far: its steps, tree and best running beams
        exc.partial = (steps, nodes, _beam_sequences(config, done, done_scores, running, running_scores,
                                                     running_nodes, names.known))
        raise
    return steps, nodes, _beam_sequences(config, done, done_scores, running, running_scores, running_nodes, names)


def _continuations(server: Server, prompt: str, running: list, running_scores: torch.Tensor, t: int, K: int):
    """Each running beam's top-K continuations from the server, as the local search's [B, K] table of
    cumulative scores; also their texts, which of them end the text, and each beam's answer (TopN).
    Only beam 0 is asked at the first step (the others hold the same prompt)."""
    B = len(running)
    table = torch.full((B, K), NEG, dtype=torch.float32)
    texts = [[""] * K for _ in range(B)]
    ends = torch.zeros(B, K, dtype=torch.bool)
    views = {}
    for b in range(B if t else 1):
        _, positions, reason = server.complete(prompt + "".join(running[b]), max_tokens=1, logprobs=K,
                                               temperature=0.0)
        if not positions or not positions[0].top:
            raise ServedError(f"server at {server.url} gave no candidates for beam {b + 1} at step {t + 1}")
        views[b] = positions[0]
        for j, (text, lp) in enumerate(positions[0].top[:K]):
            table[b, j] = lp + float(running_scores[b])
            texts[b][j] = text
            # the end of text prints nothing; the top-1 one is confirmed by the server's finish_reason
            ends[b, j] = text == "" and (j > 0 or reason == "stop")
    return table, texts, ends, views


def _record_nodes(nodes: list, candidates: list, running_nodes: list, running_scores: torch.Tensor, *, kept: set,
                  entered: set, step: int, config: DecodeConfig, names: TokenIds) -> list:
    """One tree node per candidate (beam, text, cumulative score), best first: kept (it runs on), finished
    (it entered the finished hypotheses) or pruned. Returns the new nodes' ids."""
    length = step + 1
    ids = []
    for pos, (b, text, cum) in enumerate(candidates):
        status = "kept" if pos in kept else ("finished" if pos in entered else "pruned")
        nodes.append(Node(id=len(nodes), parent=running_nodes[b], step=step, token_id=names(text), text=text,
                          logprob=cum - float(running_scores[b]), cum_logprob=cum,
                          score=beam_score(cum, length, config.length_penalty), length=length, status=status,
                          beam=b, rank=pos + 1))
        ids.append(nodes[-1].id)
    return ids


def _beam_sequences(config, done, done_scores, running, running_scores, running_nodes, names) -> list:
    """The hypotheses returned, best first: the finished ones, else the running beam in that slot."""
    sequences = []
    for slot in range(config.num_return_sequences):
        if done[slot] is None:
            pieces, cum, node = running[slot], float(running_scores[slot]), running_nodes[slot]
            score = beam_score(cum, max(len(pieces), 1), config.length_penalty)
        else:
            pieces, cum, node = done[slot]
            score = float(done_scores[slot])
        sequences.append(Sequence(token_ids=[names(p) for p in pieces], text="".join(pieces), cum_logprob=cum,
                                  score=score, node_id=node))
    return sequences
