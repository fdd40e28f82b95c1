"""Beam search that records every expansion, following transformers' own algorithm step for step.

Each step, for B beams over a vocabulary of V:
  1. forward the B running beams (one new position each, KV cache reused);
  2. log-softmax, then the processors (repetition penalty), plus each beam's running score;
  3. take the top K = 2B of the B*V continuations: beam = i // V, token = i % V;
  4. continuations ending in EOS (or at max length) among the first B are scored
     cum_logprob / length ** length_penalty and merged into the finished set (best B kept);
  5. the best B that did not finish become the running beams; the cache is reordered to them;
  6. stop when no running beam can beat the finished ones (the early-stop heuristic),
     when every slot is finished and early_stopping is on, or at max length.
Every one of the K continuations becomes a tree Node: kept, finished, or pruned.
"""
from __future__ import annotations

import time

import torch

from .config import DecodeConfig
from .decode import facts_dict, forward_kwargs, versions
from .errors import ConfigError
from .kv import cache_size
from .record import candidates_record, kv_record
from .shaping import build_processors, shape
from .tokens import encode_prompt
from .trace import Node, Sequence, Step, Trace

NEG = -1.0e9   # transformers' "never choose this" score


class BeamSearch:
    def __init__(self, lm, prompt: str, config: DecodeConfig):
        if config.strategy != "beam":
            raise ConfigError("strategy", "strategy: BeamSearch needs strategy='beam'")
        config.validate(lm.facts.vocab_size)
        self.lm, self.prompt, self.config = lm, prompt, config
        self.prompt_ids = encode_prompt(lm, prompt, config.chat, config.max_new_tokens)
        self.processors = build_processors(config)
        self.steps: list = []
        self.nodes: list = [Node(id=0, parent=None, step=-1, token_id=-1, text="", logprob=0.0, cum_logprob=0.0,
                                 score=0.0, length=0, status="root", beam=0, rank=0)]
        self.finished = False
        self._fwd = forward_kwargs(lm.model)
        B = config.num_beams
        self.running = [[] for _ in range(B)]               # generated ids per running beam
        self.running_nodes = [0] * B
        self.running_scores = torch.zeros(B)
        self.running_scores[1:] = NEG                       # only beam 0 may expand at the first step
        self.done_scores = torch.full((B,), NEG)            # the finished set, best first
        self.done = [None] * B                              # (ids, cum_logprob, node_id) per finished slot
        self.done_flags = torch.zeros(B, dtype=torch.bool)
        self.can_improve = True
        self._past = None
        self._last = None
        self._t0 = time.perf_counter()
        self._prefill_s = 0.0

    @torch.inference_mode()
    def step(self) -> Step | None:
        if self.finished:
            return None
        t0 = time.perf_counter()
        lm, cfg = self.lm, self.config
        B, P, t = cfg.num_beams, len(self.prompt_ids), len(self.steps)
        eos = set(lm.eos_token_ids)
        K = max(2, 1 + len(eos)) * B
        max_length = P + cfg.max_new_tokens
        cur_len = P + t
        context = torch.tensor([self.prompt_ids + seq for seq in self.running])     # [B, cur_len]

        # 1. forward: the prompt for every beam at first, then one new token per beam
        if self._past is None:
            out = lm.model(input_ids=context, use_cache=True, **self._fwd)
            self._prefill_s = time.perf_counter() - t0
            appended = B * P
        else:
            out = lm.model(input_ids=self._last[:, None], past_key_values=self._past, use_cache=True, **self._fwd)
            appended = B
        self._past = out.past_key_values
        _, rows, nbytes = cache_size(self._past)
        logits = out.logits[:, -1].to(torch.float32)                                 # [B, V]
        V = logits.shape[-1]

        # 2. step log-probs, shaped, plus running scores
        step_logprobs = shape(self.processors, context, torch.log_softmax(logits, dim=-1))
        accumulated = (step_logprobs + self.running_scores[:, None]).reshape(-1)

        # 3. the top K continuations over all beams
        top_scores, top_index = torch.topk(accumulated, k=K)
        top_beam = top_index // V
        top_token = top_index % V
        hits = torch.tensor([int(tok) in eos or cur_len + 1 >= max_length for tok in top_token])

        # 5 (computed first, as transformers does). the best B unfinished continue
        running_pick = torch.topk(top_scores + hits.to(torch.float32) * NEG, k=B).indices

        # 4. finished candidates among the first B, length-normalised, merged into the finished set
        length = cur_len + 1 - P
        done_candidates = top_scores / (length ** cfg.length_penalty)
        just_done = hits & (torch.arange(K) < B)
        all_full = bool(self.done_flags.all()) and cfg.early_stopping is True
        done_candidates = done_candidates + float(all_full) * NEG
        done_candidates = done_candidates + float(not self.can_improve) * NEG
        done_candidates = done_candidates + (~just_done).to(torch.float32) * NEG
        merged_scores = torch.cat((self.done_scores, done_candidates))
        merged_pick = torch.topk(merged_scores, k=B).indices

        # the tree: every one of the K continuations becomes a node
        kept_positions = set(running_pick.tolist())
        # only real hits enter: in float32, score + NEG ties with the empty slots' NEG, so topk
        # may pick a non-hit continuation to fill an empty slot; it must stay empty (and pruned)
        entered_done = {int(i) - B for i in merged_pick if int(i) >= B and bool(just_done[int(i) - B])}
        node_ids = []
        for pos in range(K):
            beam, token = int(top_beam[pos]), int(top_token[pos])
            status = "kept" if pos in kept_positions else ("finished" if pos in entered_done else "pruned")
            node = Node(id=len(self.nodes), parent=self.running_nodes[beam], step=t, token_id=token,
                        text=lm.token_texts[token], logprob=float(step_logprobs[beam, token]),
                        cum_logprob=float(top_scores[pos]),
                        score=float(top_scores[pos]) / (length ** cfg.length_penalty), length=length,
                        status=status, beam=beam, rank=pos + 1)
            self.nodes.append(node)
            node_ids.append(node.id)

        candidates = [(self.running[int(top_beam[p])] + [int(top_token[p])], float(top_scores[p]), node_ids[p])
                      for p in range(K)]
        new_done = []
        for i in merged_pick.tolist():
            new_done.append(self.done[i] if i < B else (candidates[i - B] if (i - B) in entered_done else None))
        self.done = new_done
        self.done_scores = merged_scores[merged_pick]
        self.done_flags = torch.cat((self.done_flags, just_done))[merged_pick]

        # record the distribution of the beam that the new best running beam extends
        best = int(top_beam[running_pick[0]])
        dist = candidates_record(lm, logits[best], torch.log_softmax(step_logprobs[best], -1), cfg.top_n,
                                 must_include=(int(top_token[running_pick[0]]),))

        # 5. the new running beams, and the cache reordered to match
        parent_slots = top_beam[running_pick]
        self.running = [candidates[p][0] for p in running_pick.tolist()]
        self.running_nodes = [node_ids[p] for p in running_pick.tolist()]
        self.running_scores = (top_scores + hits.to(torch.float32) * NEG)[running_pick]
        self._last = top_token[running_pick]
        self._past.reorder_cache(parent_slots)
        copied = sum(cur_len for slot, src in enumerate(parent_slots.tolist()) if slot != src)
        cached = [self.prompt_ids + self.running[slot][:-1] for slot in range(B)]
        kv = kv_record(lm.facts.kv_bytes_per_token, rows, nbytes, B, appended, copied, cached)

        # 6. stop?
        cur_len += 1
        if cfg.early_stopping == "never" and cfg.length_penalty > 0:
            best_len = max_length - P
        else:
            best_len = cur_len - P
        best_possible = float(self.running_scores[0]) / (best_len ** cfg.length_penalty)
        worst_done = torch.where(self.done_flags, self.done_scores.min(), torch.tensor(NEG))
        self.can_improve = self.can_improve and bool((best_possible > worst_done).any())
        open_beam = not (bool(self.done_flags.all()) and cfg.early_stopping is True)
        self.finished = not (self.can_improve and open_beam and not bool(hits.all()))

        step = Step(index=t, chosen_ids=[int(x) for x in self._last], chosen_texts=[lm.token_texts[int(x)] for x in self._last],
                    kv=kv, beam_node_ids=list(self.running_nodes), seconds=time.perf_counter() - t0, **dist)
        self.steps.append(step)
        return step

    def run(self) -> Trace:
        while not self.finished:
            self.step()
        return self.trace()

    def trace(self) -> Trace:
        lm, cfg = self.lm, self.config
        sequences = []
        for slot in range(cfg.num_return_sequences):
            if self.done[slot] is None:      # a partial run: show the running beams instead
                ids, cum, node = self.running[slot], float(self.running_scores[slot]), self.running_nodes[slot]
                score = cum / max(len(ids), 1) ** cfg.length_penalty
            else:
                ids, cum, node = self.done[slot]
                score = float(self.done_scores[slot])
            sequences.append(Sequence(token_ids=list(ids), text=lm.tokenizer.decode(ids, skip_special_tokens=True),
                                      cum_logprob=cum, score=score, node_id=node))
        decode_s = sum(s.seconds for s in self.steps)
        generated = len(self.steps) * cfg.num_beams
        return Trace(model=lm.name, prompt=self.prompt, prompt_token_ids=list(self.prompt_ids), config=cfg,
                     steps=list(self.steps), sequences=sequences, nodes=list(self.nodes), model_facts=facts_dict(lm),
                     versions=versions(),
                     timings={"prefill_s": self._prefill_s, "decode_s": decode_s,
                              "total_s": time.perf_counter() - self._t0,
                              "tokens_per_s": len(self.steps) / decode_s if decode_s else 0.0,
                              "beam_tokens_per_s": generated / decode_s if decode_s else 0.0})
