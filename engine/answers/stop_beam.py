"""Beam search whose hypotheses also end at a stop string: transformers' algorithm (engine/decoding/beam.py's pure
steps, tested against it), with "reached the end" meaning an end token or a token that completes a stop string.

With a stop string that no token boundary splits (a newline, 。), this is exactly transformers' beam search
with every token that holds a stop string added to `eos_token_id`: the same K = max(2, 1 + end tokens) x B
continuations ranked each step, the same finished set, the same early stop (the tests check it against
`generate`). A stop string split across tokens ends a hypothesis where its last piece is added, as a server's
`stop` would. Only for the Whole answers' landings, so nothing of the search is recorded.
"""
from __future__ import annotations

import copy

import torch

from engine.decoding.beam import (NEG, early_stop_heuristic, has_unfinished_sequences, running_beams_for_next_iteration,
                    top_k_continuations, update_finished_beams)
from .passes import PromptCache
from .stops import Endings


@torch.inference_mode()
def beam_tokens(lm, prompt_ids: list, width: int, max_new_tokens: int, endings: Endings,
                length_penalty: float = 1.0) -> list:
    """The best hypothesis' tokens (its ending token included when it ended): `width` beams, at most
    `max_new_tokens` tokens, early_stopping off, the model's own log-probabilities as `generate` scores them."""
    B, P = width, len(prompt_ids)
    prompt = PromptCache(lm, prompt_ids)
    vocab = prompt.logits.shape[-1]
    n_end = len(endings.ends) + (int(endings.inner_mask.sum()) if endings.stopping else 0)
    K = min(max(2, 1 + n_end) * B, B * vocab)
    max_length = P + max_new_tokens
    past = copy.deepcopy(prompt._past)
    if B > 1:
        past.batch_repeat_interleave(B)
    fwd = prompt._fwd
    running: list = [[] for _ in range(B)]
    texts: list = [b""] * B
    running_scores = torch.zeros(B)
    running_scores[1:] = NEG                       # only beam 0 expands at the first step
    done_scores, done_flags = torch.full((B,), NEG), torch.zeros(B, dtype=torch.bool)
    done: list = [None] * B
    can_improve = True
    logits = prompt.logits.expand(B, -1)
    for t in range(max_new_tokens):
        cur_len = P + t
        accumulated = torch.log_softmax(logits.float(), dim=-1) + running_scores[:, None]
        top_scores, top_beam, top_token = top_k_continuations(accumulated, K)
        ends = torch.stack([endings.mask_after(text) for text in texts])                     # [B, V]
        reached = ends[top_beam, top_token] | (cur_len + 1 >= max_length)
        running_pick, next_scores = running_beams_for_next_iteration(top_scores, reached, B)
        merged_pick, done_scores, done_flags, just_done = update_finished_beams(
            done_scores, done_flags, top_scores, reached, length=cur_len + 1 - P, length_penalty=length_penalty,
            early_stopping=False, can_improve=can_improve)
        entered = {i - B for i in merged_pick.tolist() if i >= B and bool(just_done[i - B])}
        continuations = [running[int(top_beam[p])] + [int(top_token[p])] for p in range(K)]
        done = [done[i] if i < B else (continuations[i - B] if (i - B) in entered else None)
                for i in merged_pick.tolist()]
        parents = top_beam[running_pick]
        running = [continuations[p] for p in running_pick.tolist()]
        texts = [endings.extend(texts[int(b)], int(tok)) for b, tok in zip(parents, top_token[running_pick])]
        running_scores = next_scores
        can_improve = early_stop_heuristic(can_improve, running_scores, done_scores, done_flags, cur_len=cur_len + 1,
                                           max_length=max_length, prompt_len=P, early_stopping=False,
                                           length_penalty=length_penalty)
        if not has_unfinished_sequences(can_improve, done_flags, reached, False):
            break
        past.reorder_cache(parents.to(lm.device))
        out = lm.model(input_ids=top_token[running_pick][:, None].to(lm.device), past_key_values=past,
                       use_cache=True, **fwd)
        logits = out.logits[:, -1].to("cpu", torch.float32)
    return done[0] if done[0] is not None else running[0]
