"""Hand-made traces shared by test modules: every probability, rank and score is written out here, so the
answers the tests expect can be worked out on paper."""
from __future__ import annotations

import dataclasses
import math

from engine import Candidate, DecodeConfig, Node, Sequence, Step, Trace


# ---- steps of a few candidates each (explain, escape, what happened) ----------------------------------------
def text_of(token_id: int) -> str:
    return f" w{token_id}"


def make_step(index: int, ranked: list, chosen: int, entropy: float = 0.5, shaped: dict | None = None,
              ranks: dict | None = None) -> Step:
    """ranked: [(token_id, raw prob)] most likely first; ranks/shaped override a token's rank/shaped prob."""
    shaped, ranks = shaped or {}, ranks or {}
    candidates = [Candidate(token_id=t, text=text_of(t), logit=math.log(p), prob=p, logprob=math.log(p),
                            rank=ranks.get(t, i + 1), shaped_prob=shaped.get(t, p), kept=True)
                  for i, (t, p) in enumerate(ranked)]
    return Step(index=index, candidates=candidates, entropy=entropy, shaped_entropy=entropy, removed_mass=0.0,
                kept_count=len(candidates), chosen_ids=[chosen], chosen_texts=[text_of(chosen)])


def confident(index: int, token: int, entropy: float = 0.5) -> Step:
    """The token is the argmax with 0.9; one alternative with 0.05."""
    return make_step(index, [(token, 0.9), (999, 0.05)], token, entropy)


def make_trace(steps: list, strategy: str = "sample", forced: dict | None = None, **config) -> Trace:
    ids = [s.chosen_ids[0] for s in steps]
    cum = sum(next(c.logprob for c in s.candidates if c.token_id == s.chosen_ids[0]) for s in steps)
    return Trace(model="hand-made", prompt="p", prompt_token_ids=[1], steps=steps,
                 config=DecodeConfig(strategy=strategy, max_new_tokens=max(len(steps), 1), **config),
                 sequences=[Sequence(token_ids=ids, text="".join(text_of(i) for i in ids), cum_logprob=cum,
                                     score=cum / max(len(ids), 1))],
                 forced=forced or {})


def loop_trace() -> Trace:
    """w10..w16, then w20 w21 three times back to back from step 7, then w22."""
    ids = [10, 11, 12, 13, 14, 15, 16, 20, 21, 20, 21, 20, 21, 22]
    return make_trace([confident(i, t) for i, t in enumerate(ids)])


def low_pick_trace() -> Trace:
    """Six confident steps except step 3, which picks w4 at raw prob 0.005 (rank 4)."""
    steps = [confident(i, 30 + i) for i in range(6)]
    steps[3] = make_step(3, [(1, 0.6), (2, 0.3), (3, 0.05), (4, 0.005)], chosen=4)
    return make_trace(steps)


def quiet_trace() -> Trace:
    """Greedy, eight distinct confident tokens, flat entropy: nothing to report."""
    return make_trace([confident(i, 50 + i, entropy=0.4) for i in range(8)], strategy="greedy")


ESCAPE_P = [0.5, 0.25, 0.15, 0.1]      # the loop token w20 first, then w31 w32 w33 (loop_with's repeat step)


def loop_with(repeat_step, vocab_size=None, **config):
    """w10..w16, then w20 w21 three times from step 7; step 9 (the first repeat) gets the given candidates."""
    ids = [10, 11, 12, 13, 14, 15, 16, 20, 21, 20, 21, 20, 21, 22]
    steps = [confident(i, t) for i, t in enumerate(ids)]
    steps[9] = repeat_step
    trace = make_trace(steps, **config)
    return dataclasses.replace(trace, model_facts={"vocab_size": vocab_size} if vocab_size else {})


# ---- one step for the candidates figure, and a two-beam tree (figures) ----------------------------------------
def candidate(token_id, text, prob, rank, shaped, kept=True):
    return Candidate(token_id=token_id, text=text, logit=math.log(prob), prob=prob, logprob=math.log(prob), rank=rank,
                     shaped_prob=shaped, kept=kept)


def figure_step(index, cands, chosen, text):
    return Step(index=index, candidates=cands, entropy=1.0, shaped_entropy=0.5, removed_mass=0.2, kept_count=2,
                chosen_ids=[chosen], chosen_texts=[text])


# three candidates: " the" 0.5, "<b>" 0.3, "\n" 0.2; top-p cut the last; the second was chosen
STEP = figure_step(0, [candidate(7, " the", 0.5, 1, 0.625), candidate(9, "<b>", 0.3, 2, 0.375),
                       candidate(4, "\n", 0.2, 3, 0.0, kept=False)],
                   chosen=9, text="<b>")


def beam_node(id, parent, stp, text, lp, cum, status, rank, tok=None):
    length = stp + 1
    return Node(id=id, parent=parent, step=stp, token_id=id if tok is None else tok, text=text, logprob=lp,
                cum_logprob=cum, score=cum / length, length=length, status=status, beam=0, rank=rank)


NODES = [Node(id=0, parent=None, step=-1, token_id=-1, text="", logprob=0.0, cum_logprob=0.0, score=0.0, length=0,
              status="root", beam=0, rank=0),
         beam_node(1, 0, 0, "A", -0.5, -0.5, "kept", 1), beam_node(2, 0, 0, "B", -1.0, -1.0, "kept", 2),
         beam_node(3, 0, 0, "C", -2.0, -2.0, "pruned", 3), beam_node(4, 0, 0, "<eos>", -2.5, -2.5, "pruned", 4, tok=0),
         beam_node(5, 1, 1, "x", -0.5, -1.0, "kept", 1), beam_node(6, 2, 1, "<eos>", -0.4, -1.4, "finished", 2, tok=0),
         beam_node(7, 1, 1, "y", -1.1, -1.6, "kept", 3), beam_node(8, 2, 1, "z", -2.0, -3.0, "pruned", 4),
         beam_node(9, 5, 2, "<eos>", -0.9, -1.9, "finished", 1, tok=0),
         beam_node(10, 7, 2, "<eos>", -0.5, -2.1, "finished", 2, tok=0),
         beam_node(11, 7, 2, "w", -1.5, -3.1, "pruned", 3), beam_node(12, 7, 2, "v", -1.6, -3.2, "pruned", 4)]


def beam_trace(length_penalty=1.0):
    config = DecodeConfig(strategy="beam", num_beams=2, max_new_tokens=3, length_penalty=length_penalty)
    steps = [Step(index=i, candidates=[], entropy=1.0, shaped_entropy=1.0, removed_mass=0.0, kept_count=10,
                  chosen_ids=[1, 2], chosen_texts=["a", "b"], beam_node_ids=ids)
             for i, ids in enumerate([[1, 2], [5, 7], [9, 10]])]
    seqs = [Sequence(token_ids=[1, 5, 0], text="Ax", cum_logprob=-1.9, score=-1.9 / 3, node_id=9)]
    return Trace(model="hand", prompt="p", prompt_token_ids=[1], config=config, steps=steps, sequences=seqs,
                 nodes=NODES)


# ---- a three-step greedy trace with one candidate per step (Play) ---------------------------------------------
PLAY_PROBS = (0.5, 0.25, 0.125)     # the chosen token's probability at each step of hand_made_trace


def hand_made_trace():
    """A three-step greedy trace, each step with one candidate of a known probability."""
    def step(i, p):
        c = Candidate(token_id=10 + i, text=f" w{i}", logit=0.0, prob=p, logprob=math.log(p), rank=1,
                      shaped_prob=p, kept=True)
        return Step(index=i, candidates=[c], entropy=0.1, shaped_entropy=0.1, removed_mass=0.0, kept_count=1,
                    chosen_ids=[10 + i], chosen_texts=[f" w{i}"])

    return Trace(model="hand-made", prompt="Hi", prompt_token_ids=[1], config=DecodeConfig(max_new_tokens=3),
                 steps=[step(i, p) for i, p in enumerate(PLAY_PROBS)],
                 sequences=[Sequence(token_ids=[10, 11, 12], text=" w0 w1 w2",
                                     cum_logprob=sum(map(math.log, PLAY_PROBS)), score=0.0)])


# ---- a real speculative run (the reader's and the pages' hostile-file tests edit it) ---------------------------
def kept_then_rejected_run(target, draft, seeds: int = 50) -> Trace:
    """A sampled speculative decode of `target` with the model `draft` whose first round keeps one draft and
    rejects the next, with a second round: the run the hostile speculative files are edited from."""
    from engine import decode

    for seed in range(seeds):
        trace = decode(target, "The capital of France is Paris. The capital of Italy is", DecodeConfig(
            strategy="speculative", draft="model:gpt2", draft_tokens=4, verify="sample", temperature=1.5,
            repetition_penalty=1.3, max_new_tokens=10, seed=seed), draft_lm=draft)
        statuses = [d.status for d in trace.rounds[0].drafts]
        if statuses[:2] == ["kept", "rejected"] and len(trace.rounds) >= 2:
            return trace
    raise AssertionError(f"no seed of {seeds} gave a first round of kept, rejected")
