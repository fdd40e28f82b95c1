"""Beam search that records every expansion, following transformers' own algorithm step for step.

Each step, for B beams over a vocabulary of V (one prompt; transformers adds a batch dim):
  1. forward the B running beams (one new position each, KV cache reused);
  2. log-softmax, then the processors (repetition penalty), plus each beam's running score;
  3. `top_k_continuations`: the top K = 2B of the B*V continuations (beam = i // V, token = i % V);
  4. `running_beams_for_next_iteration`: the best B that did not hit end-of-text or max length;
  5. `update_finished_beams`: those of the first B that ended, scored cum_logprob / length ** length_penalty,
     merged into the finished set (best B kept);
  6. `early_stop_heuristic` and `has_unfinished_sequences`: stop when no running beam can beat
     the finished ones, when every slot is finished and early_stopping is on, or at max length.
The helpers are pure tensor functions named after transformers' own `_get_top_k_continuations`,
`_get_running_beams_for_next_iteration`, `_update_finished_beams`, `_check_early_stop_heuristic`
and `_beam_search_has_unfinished_sequences`, and are tested against them.
Every one of the K continuations becomes a tree Node: kept, finished, or pruned.
"""
from __future__ import annotations

import torch

from engine.config import DecodeConfig
from engine.grammar.constrain import grammar_record
from engine.errors import ConfigError
from engine.model import LoadedModel
from engine.decoding.record import Distribution, candidates_record, kv_record
from engine.decoding.runner import Forward, Runner
from engine.samplers.shaping import shape
from engine.trace import KVStep, Node, Sequence, Step

NEG = -1.0e9   # transformers' "never choose this" score


# ---- the algorithm, as pure helpers ---------------------------------------------------
def beam_score(cum_logprob, length, length_penalty: float):
    """A hypothesis' length-normalised score, as transformers computes it: cum_logprob / length ** length_penalty,
    length counting generated tokens only. The one place the formula is written (floats or tensors)."""
    return cum_logprob / (length ** length_penalty)


def top_k_continuations(accumulated: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """accumulated: [B, V] running score + step log-prob of every continuation.
    Returns (scores [k], beam [k], token [k]): the k best over all beams, best first."""
    vocab = accumulated.shape[-1]
    scores, index = torch.topk(accumulated.reshape(-1), k=k)    # over the flat [B * V]
    return scores, index // vocab, index % vocab


def running_beams_for_next_iteration(top_scores: torch.Tensor, reached_stop: torch.Tensor,
                                     num_beams: int) -> tuple[torch.Tensor, torch.Tensor]:
    """top_scores, reached_stop: [K]. The best `num_beams` continuations that did not just finish.
    Returns (positions into the K [B], their running scores [B])."""
    running = top_scores + reached_stop.to(torch.float32) * NEG       # a finished continuation never runs on
    pick = torch.topk(running, k=num_beams).indices
    return pick, running[pick]


def update_finished_beams(done_scores: torch.Tensor, done_flags: torch.Tensor, top_scores: torch.Tensor,
                          reached_stop: torch.Tensor, *, length: int, length_penalty: float, early_stopping,
                          can_improve: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Merge this step's finished continuations into the finished set.

    done_scores, done_flags: [B] the finished set so far (NEG / False in empty slots);
    top_scores, reached_stop: [K] this step's continuations and whether each ended (end-of-text or max
    length). Only those that ended among the first B may enter,
    scored top_score / length ** length_penalty; none enter once every slot is full under
    early_stopping=True, or once the search cannot improve.
    Returns (merged_pick [B] indices into cat(done, continuations), scores [B], flags [B],
    just_done [K])."""
    B, K = done_scores.shape[0], top_scores.shape[0]
    just_done = reached_stop & (torch.arange(K) < B)
    candidates = beam_score(top_scores, length, length_penalty)
    candidates = candidates + float(bool(done_flags.all()) and early_stopping is True) * NEG
    candidates = candidates + float(not can_improve) * NEG
    candidates = candidates + (~just_done).to(torch.float32) * NEG
    merged_scores = torch.cat((done_scores, candidates))
    merged_pick = torch.topk(merged_scores, k=B).indices
    return merged_pick, merged_scores[merged_pick], torch.cat((done_flags, just_done))[merged_pick], just_done


def early_stop_heuristic(can_improve: bool, running_scores: torch.Tensor, done_scores: torch.Tensor,
                         done_flags: torch.Tensor, *, cur_len: int, max_length: int, prompt_len: int,
                         early_stopping, length_penalty: float) -> bool:
    """Can the best running beam still beat the worst finished one? running_scores, done_*: [B].
    The best hypothetical length is today's, or max length under early_stopping="never" with a
    positive length penalty (a longer hypothesis can then score higher)."""
    if early_stopping == "never" and length_penalty > 0:
        best_len = max_length - prompt_len
    else:
        best_len = cur_len - prompt_len
    best_possible = beam_score(float(running_scores[0]), best_len, length_penalty)
    worst_done = torch.where(done_flags, done_scores.min(), torch.tensor(NEG))
    return can_improve and bool((best_possible > worst_done).any())


def has_unfinished_sequences(can_improve: bool, done_flags: torch.Tensor, reached_stop: torch.Tensor,
                             early_stopping) -> bool:
    """Go on while improvement is possible, a slot is still open (under early_stopping=True),
    and some continuation did not hit end-of-text or max length.

    done_flags: [B] which slots of the finished set are filled; reached_stop: [K] (K = 2B) whether each of
    this step's continuations ended; can_improve: the result of `early_stop_heuristic`."""
    open_slot = not (bool(done_flags.all()) and early_stopping is True)
    return can_improve and open_slot and not bool(reached_stop.all())


# ---- the search, recorded --------------------------------------------------------------
class BeamSearch(Runner):
    """A beam search in progress; `nodes` is the tree of every continuation ranked so far."""

    def __init__(self, lm: LoadedModel, prompt: str, config: DecodeConfig):
        if config.strategy != "beam":
            raise ConfigError("strategy", "strategy: BeamSearch needs strategy='beam'")
        super().__init__(lm, prompt, config)
        B = config.num_beams
        self.nodes: list[Node] = [Node(id=0, parent=None, step=-1, token_id=-1, text="", logprob=0.0,
                                       cum_logprob=0.0, score=0.0, length=0, status="root", beam=0, rank=0)]
        self.running: list[list[int]] = [[] for _ in range(B)]   # generated ids per running beam
        self.running_nodes = [0] * B
        self.running_scores = torch.zeros(B)
        self.running_scores[1:] = NEG                       # only beam 0 may expand at the first step
        self.done_scores = torch.full((B,), NEG)            # the finished set, best first
        self.done: list = [None] * B                        # (ids, cum_logprob, node_id) per finished slot
        self.done_flags = torch.zeros(B, dtype=torch.bool)
        self.can_improve = True
        self._last: torch.Tensor | None = None              # [B] the running beams' last tokens

    def _advance(self) -> Step:
        """One step of the search (1-6 in the module docstring), with its tree nodes, distribution and KV account."""
        lm, cfg = self.lm, self.config
        B, P, t = cfg.num_beams, len(self.prompt_ids), len(self.steps)
        eos = set(lm.eos_token_ids)
        K = max(2, 1 + len(eos)) * B
        max_length = P + cfg.max_new_tokens
        cur_len = P + t
        context = torch.tensor([self.prompt_ids + seq for seq in self.running])     # [B, cur_len]

        # 1. forward: the prompt for every beam at first, then one new token per beam
        fwd = self.forward(input_ids=context if self._last is None else self._last[:, None])

        # 2. step log-probs, shaped, plus running scores
        step_logprobs = shape(self.processors, context, torch.log_softmax(fwd.logits, dim=-1))   # [B, V]
        accumulated = step_logprobs + self.running_scores[:, None]

        # 3. the top K continuations over all beams, and which of them end here
        top_scores, top_beam, top_token = top_k_continuations(accumulated, K)
        reached_stop = torch.tensor([int(tok) in eos or cur_len + 1 >= max_length for tok in top_token])   # [K]

        # 4. the best B unfinished continue (computed before 5, as transformers does)
        running_pick, running_scores = running_beams_for_next_iteration(top_scores, reached_stop, B)

        # 5. finished continuations merged into the finished set
        length = cur_len + 1 - P
        merged_pick, done_scores, done_flags, just_done = update_finished_beams(
            self.done_scores, self.done_flags, top_scores, reached_stop, length=length,
            length_penalty=cfg.length_penalty, early_stopping=cfg.early_stopping, can_improve=self.can_improve)
        # only continuations that really ended enter: in float32, score + NEG ties with the empty slots' NEG,
        # so topk may pick one that did not end to fill an empty slot; that slot must stay empty (and it pruned)
        entered = {i - B for i in merged_pick.tolist() if i >= B and bool(just_done[i - B])}

        node_ids = self._record_nodes(top_scores, top_beam, top_token, step_logprobs,
                                      kept=set(running_pick.tolist()), entered=entered, length=length)
        continuations = [(self.running[int(top_beam[p])] + [int(top_token[p])], float(top_scores[p]), node_ids[p])
                         for p in range(K)]
        self.done = [self.done[i] if i < B else (continuations[i - B] if (i - B) in entered else None)
                     for i in merged_pick.tolist()]
        self.done_scores, self.done_flags = done_scores, done_flags

        # the records: the distribution shown, then (after the reorder) the cache
        best_beam, best_token = int(top_beam[running_pick[0]]), int(top_token[running_pick[0]])
        dist = self._record_distribution(fwd, step_logprobs, beam=best_beam, token=best_token)
        grammar = self._record_grammar(best_beam, best_token)

        # the new running beams, and the cache reordered to match
        parent_slots = top_beam[running_pick]
        self.running = [continuations[p][0] for p in running_pick.tolist()]
        self.running_nodes = [node_ids[p] for p in running_pick.tolist()]
        self.running_scores = running_scores
        self._last = top_token[running_pick]
        self._past.reorder_cache(parent_slots.to(self.lm.device))
        kv = self._record_kv(fwd, parent_slots, cur_len)

        # 6. stop?
        self._check_stop(reached_stop, cur_len=cur_len + 1, max_length=max_length)

        return Step(index=t, chosen_ids=[int(x) for x in self._last],
                    chosen_texts=[lm.token_texts[int(x)] for x in self._last], kv=kv,
                    beam_node_ids=list(self.running_nodes), candidates=dist.candidates, entropy=dist.entropy,
                    varentropy=dist.varentropy,
                    shaped_entropy=dist.shaped_entropy, removed_mass=dist.removed_mass, kept_count=dist.kept_count,
                    grammar=grammar)

    def _check_stop(self, reached_stop: torch.Tensor, *, cur_len: int, max_length: int) -> None:
        """6. Whether a running beam can still beat the finished ones, and whether the search is over."""
        cfg = self.config
        self.can_improve = early_stop_heuristic(
            self.can_improve, self.running_scores, self.done_scores, self.done_flags, cur_len=cur_len,
            max_length=max_length, prompt_len=len(self.prompt_ids), early_stopping=cfg.early_stopping,
            length_penalty=cfg.length_penalty)
        self.finished = not has_unfinished_sequences(self.can_improve, self.done_flags, reached_stop,
                                                     cfg.early_stopping)

    def _record_grammar(self, beam: int, token: int):
        """The grammar's mask a step shows: that of `beam`, the beam the best running beam extends with `token`
        (None without a grammar)."""
        if self.grammar is None:
            return None
        accepting = self.grammar.accepting(tuple(self.running[beam] + [token]))
        return grammar_record(self.lm.token_texts, self.grammar.last_scores[beam], self.grammar.last_allowed[beam],
                              accepting)

    def _record_distribution(self, fwd: Forward, step_logprobs: torch.Tensor, *, beam: int, token: int) -> Distribution:
        """The distribution a step shows: that of `beam`, the beam the new best running beam extends with `token`.

        fwd.logits, step_logprobs: [B, V] raw scores and shaped log-probs of every running beam."""
        return candidates_record(self.lm, fwd.logits[beam], torch.log_softmax(step_logprobs[beam], -1),
                                 self.config.top_n, must_include=(token,))

    def _record_kv(self, fwd: Forward, parent_slots: torch.Tensor, cur_len: int) -> KVStep:
        """The cache after this step's reorder. parent_slots: [B] the slot each new running beam came from;
        a beam that moved slot had its cur_len rows copied. Call after `self.running` holds the new beams."""
        B = self.config.num_beams
        copied = sum(cur_len for slot, src in enumerate(parent_slots.tolist()) if slot != src)
        return kv_record(self.lm.facts.kv_bytes_per_token, rows_per_beam=fwd.cache_rows,
                         cache_bytes=fwd.cache_bytes, beams=B, appended=fwd.appended, copied=copied,
                         cached_sequences=[self.prompt_ids + self.running[slot][:-1] for slot in range(B)])

    def _record_nodes(self, top_scores, top_beam, top_token, step_logprobs, *, kept: set, entered: set,
                      length: int) -> list[int]:
        """Every one of the K continuations becomes a Node (kept, finished or pruned); returns their ids."""
        lm, cfg, t = self.lm, self.config, len(self.steps)
        ids = []
        for pos in range(top_scores.shape[0]):
            beam, token = int(top_beam[pos]), int(top_token[pos])
            status = "kept" if pos in kept else ("finished" if pos in entered else "pruned")
            node = Node(id=len(self.nodes), parent=self.running_nodes[beam], step=t, token_id=token,
                        text=lm.token_texts[token], logprob=float(step_logprobs[beam, token]),
                        cum_logprob=float(top_scores[pos]),
                        score=beam_score(float(top_scores[pos]), length, cfg.length_penalty), length=length,
                        status=status, beam=beam, rank=pos + 1)
            self.nodes.append(node)
            ids.append(node.id)
        return ids

    # ---- the trace's parts -------------------------------------------------------
    def _sequences(self) -> list[Sequence]:
        cfg, out = self.config, []
        for slot in range(cfg.num_return_sequences):
            if self.done[slot] is None:      # a partial run: show the running beams instead
                ids, cum, node = self.running[slot], float(self.running_scores[slot]), self.running_nodes[slot]
                score = beam_score(cum, max(len(ids), 1), cfg.length_penalty)
            else:
                ids, cum, node = self.done[slot]
                score = float(self.done_scores[slot])
            out.append(Sequence(token_ids=list(ids), text=self.lm.tokenizer.decode(ids, skip_special_tokens=True),
                                cum_logprob=cum, score=score, node_id=node))
        return out

    def _nodes(self) -> list[Node]:
        return list(self.nodes)

    def _timings(self, decode_s: float) -> dict:
        generated = len(self.steps) * self.config.num_beams
        return {"beam_tokens_per_s": generated / decode_s if decode_s else 0.0}
