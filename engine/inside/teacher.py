"""Teacher forcing, free running, and scheduled sampling: where exposure bias comes from.

Training feeds the model the true prefix (teacher forcing); generation feeds it its own
tokens (free running). This module measures both on the same prompt and reference:
  1. `teacher_force`: one forward pass over prompt + reference scores every reference
     token (probability, rank, entropy, top candidates) given the true prefix;
  2. `free_run`: the model continues the prompt by itself (engine.Decoder, greedy or
     sampled); one more forward pass gives its distributions given its own prefix;
  3. `compare`: from the first position where its token differs from the reference,
     the two next-token distributions side by side and KL(true prefix || own prefix);
  4. `scheduled_sampling`: each position's input is the model's own prediction with
     probability eps, else the reference token; `epsilon_curve` sweeps eps with the
     same seeded coins, so eps = 0 is teacher forcing and eps = 1 is free running.
Records are frozen dataclasses of plain values. Every random draw uses a torch.Generator.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from engine.config import DecodeConfig
from engine.decoding.decoder import Decoder
from engine.errors import ConfigError
from engine.model import LoadedModel
from engine.decoding.runner import forward_kwargs
from engine.samplers.shaping import build_processors, entropy, shape
from engine.tokens import encode_prompt
from engine.trace import Neighbour

TOP = 5   # candidates kept per position


@dataclass(frozen=True)
class Scored:
    """One reference token under teacher forcing (given the true prefix)."""
    index: int           # 0 = first reference token
    token_id: int
    text: str
    prob: float
    logprob: float
    rank: int            # 1 = the model's top choice
    entropy: float       # of the whole next-token distribution, nats
    top: list            # [Neighbour] (value = prob), best first


@dataclass(frozen=True)
class TeacherForced:
    prompt_ids: list
    reference_ids: list
    positions: list      # [Scored]
    logprob: float       # sum over the reference
    seconds: float


@dataclass(frozen=True)
class Divergence:
    """One position from the first divergence on: own-prefix vs true-prefix distribution."""
    index: int
    own_token_id: int    # what free running produced here
    own_text: str
    true_token_id: int   # the reference token here
    true_text: str
    kl: float            # KL(p(. | true prefix) || p(. | own prefix)), nats
    own_top: list        # [Neighbour] given the model's own prefix
    true_top: list       # [Neighbour] given the reference prefix
    own_prob_of_true: float   # p(reference token | own prefix)


@dataclass(frozen=True)
class FreeRun:
    token_ids: list
    texts: list
    text: str
    strategy: str
    first_divergence: int | None   # first index where the own token differs from the reference
    comparison: list                # [Divergence] from first_divergence to the end
    logprob: float                  # log p(reference | own prefix at every position), summed
    seconds: float


@dataclass(frozen=True)
class ScheduledRun:
    epsilon: float
    swapped: list        # per position: True if its input came from the model, not the reference
    inputs: list         # the token id fed at each position (the reference where not swapped)
    input_texts: list
    logprobs: list       # log p(reference token | mixed prefix) per position
    logprob: float       # their sum
    forward_passes: int


# ---- helpers ---------------------------------------------------------------------
def encode_reference(lm: LoadedModel, reference: str) -> list:
    """Token ids of the reference continuation (no special tokens added)."""
    if not isinstance(reference, str) or not reference.strip():
        raise ConfigError("reference", "reference: is empty; type the text the model should be scored on",
                          "reference_empty")
    ids = lm.tokenizer(reference, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ConfigError("reference", "reference: gives no tokens", "reference_no_tokens")
    return ids


def _top(lm: LoadedModel, probs: torch.Tensor, k: int = TOP) -> list:
    top = torch.topk(probs, k=min(k, probs.shape[-1]))
    return [Neighbour(int(i), lm.token_texts[int(i)], float(v)) for v, i in zip(top.values, top.indices)]


def _forward(lm: LoadedModel, ids: list, keep: int, past=None, cache: bool = False):
    """One forward pass over `ids` (after `past`); logits for the last `keep` positions only where supported."""
    extra = {"logits_to_keep": keep} if forward_kwargs(lm.model) else {}
    out = lm.model(input_ids=torch.tensor([ids], device=lm.device), past_key_values=past, use_cache=cache,
                   **extra)
    return out.logits[0, -keep:].to("cpu", torch.float32), out.past_key_values


def _next_token_logprobs(lm: LoadedModel, prompt_ids: list, continuation: list) -> torch.Tensor:
    """[len(continuation), vocab] log p(. | prompt + continuation[:i]) for each i, in one forward pass."""
    n = len(continuation)
    logits, _ = _forward(lm, prompt_ids + continuation[:-1], n)   # the last token is never an input
    return torch.log_softmax(logits, dim=-1)


def _check_length(lm: LoadedModel, prompt_ids: list, reference_ids: list) -> None:
    total = len(prompt_ids) + len(reference_ids)
    if total > lm.facts.context_length:
        raise ConfigError("reference", f"reference: prompt plus reference is {total:,} tokens, longer than the "
                                       f"model's context of {lm.facts.context_length:,}; shorten it",
                          "reference_over_context", n=f"{total:,}", context=f"{lm.facts.context_length:,}")


# ---- 1. teacher forcing -------------------------------------------------------------
@torch.inference_mode()
def teacher_force(lm: LoadedModel, prompt: str, reference: str, chat: bool = False) -> TeacherForced:
    """Score every reference token given the true prefix, with a single forward pass."""
    t0 = time.perf_counter()
    prompt_ids = encode_prompt(lm, prompt, chat)
    reference_ids = encode_reference(lm, reference)
    _check_length(lm, prompt_ids, reference_ids)
    logprobs = _next_token_logprobs(lm, prompt_ids, reference_ids)
    probs = logprobs.exp()
    positions = []
    for i, token in enumerate(reference_ids):
        row = logprobs[i]
        positions.append(Scored(
            index=i, token_id=token, text=lm.token_texts[token], prob=float(probs[i, token]),
            logprob=float(row[token]), rank=int((row > row[token]).sum()) + 1,
            entropy=float(entropy(probs[i])), top=_top(lm, probs[i])))
    return TeacherForced(prompt_ids=prompt_ids, reference_ids=reference_ids, positions=positions,
                         logprob=float(sum(p.logprob for p in positions)), seconds=time.perf_counter() - t0)


# ---- 2-3. free running and the comparison ------------------------------------------
def kl_divergence(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last dim from log-probabilities, in nats; p = 0 terms count 0."""
    p = logp.exp()
    return torch.where(p > 0, p * (logp - logq), torch.zeros_like(p)).sum(-1)


@torch.inference_mode()
def free_run(lm: LoadedModel, teacher: TeacherForced, prompt: str, strategy: str = "greedy", temperature: float = 1.0,
             seed: int = 0, chat: bool = False) -> FreeRun:
    """Let the model continue the prompt by itself for as many tokens as the reference has."""
    if strategy not in ("greedy", "sample"):
        raise ConfigError("strategy", f"strategy: free running uses greedy or sample, got '{strategy}'")
    t0 = time.perf_counter()
    n = len(teacher.reference_ids)
    config = DecodeConfig(strategy=strategy, max_new_tokens=n, temperature=temperature, seed=seed, top_n=1, chat=chat)
    trace = Decoder(lm, prompt, config).run()
    own = [s.chosen_ids[0] for s in trace.steps]
    ref = teacher.reference_ids
    first = next((i for i, (a, b) in enumerate(zip(own, ref)) if a != b), None)
    comparison = []
    own_logprob = 0.0
    own_logprobs = _next_token_logprobs(lm, teacher.prompt_ids, own)      # p(. | prompt + own[:i])
    true_logprobs = _next_token_logprobs(lm, teacher.prompt_ids, ref)     # p(. | prompt + ref[:i])
    m = min(len(own), len(ref))
    kl = kl_divergence(true_logprobs[:m], own_logprobs[:m])
    for i in range(m):
        own_logprob += float(own_logprobs[i, ref[i]])
    if first is not None:
        for i in range(first, m):
            comparison.append(Divergence(
                index=i, own_token_id=own[i], own_text=lm.token_texts[own[i]], true_token_id=ref[i],
                true_text=lm.token_texts[ref[i]], kl=float(kl[i]), own_top=_top(lm, own_logprobs[i].exp()),
                true_top=_top(lm, true_logprobs[i].exp()), own_prob_of_true=float(own_logprobs[i, ref[i]].exp())))
    return FreeRun(token_ids=own, texts=[lm.token_texts[t] for t in own],
                   text=lm.tokenizer.decode(own, skip_special_tokens=True), strategy=strategy,
                   first_divergence=first, comparison=comparison, logprob=own_logprob,
                   seconds=time.perf_counter() - t0)


# ---- 4. scheduled sampling --------------------------------------------------------------
def coins(n: int, seed: int) -> list:
    """One uniform draw per position from a seeded generator; position i is swapped when coins[i] < eps.
    Every eps uses the same draws, so the swapped set only grows as eps grows."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g).tolist()


def runs(swapped: list) -> list:
    """(i, j) spans of one forward pass each: predict positions i..j from reference inputs i..j-1.

    A span ends at the next swapped position (its input must wait for the model's prediction
    there) or at the last position."""
    spans, i, n = [], 0, len(swapped)
    while i < n:
        j = i
        while j < n - 1 and not swapped[j]:
            j += 1
        spans.append((i, j))
        i = j + 1
    return spans


def curve_passes(n: int, points: int, seed: int = 0) -> int:
    """Forward passes `epsilon_curve` makes for n reference tokens, counted from the coins alone
    (so the page can say what the curve costs before running it)."""
    u = coins(n, seed)
    return sum(len(runs([c < k / (points - 1) for c in u])) for k in range(points))


@torch.inference_mode()
def scheduled_sampling(lm: LoadedModel, teacher: TeacherForced, epsilon: float, seed: int = 0, strategy: str = "greedy",
                       temperature: float = 1.0) -> ScheduledRun:
    """Score the reference when each position's input is, with probability eps, the model's own prediction.

    Position i predicts reference token i from the inputs before it. Its own input (fed when
    predicting i + 1) is the model's prediction at i if swapped, else reference token i. Runs of
    reference inputs go through the model in one pass; each swapped position needs the logits
    just before it, so there is one forward pass per swap plus one per run.
    """
    if not 0.0 <= epsilon <= 1.0:
        raise ConfigError("epsilon", f"epsilon: must be in [0, 1], got {epsilon}")
    if strategy not in ("greedy", "sample"):
        raise ConfigError("strategy", f"strategy: predictions are greedy or sample, got '{strategy}'")
    ref = teacher.reference_ids
    n = len(ref)
    swapped = [u < epsilon for u in coins(n, seed)]
    # token draws use their own generator, seeded like engine.Decoder, so eps = 1 with sampling
    # draws exactly the tokens free running draws
    draws = torch.Generator().manual_seed(seed)
    processors = build_processors(DecodeConfig(strategy=strategy, temperature=temperature))
    inputs: list = []
    logprobs: list = []
    passes = 0
    past = None
    pending = list(teacher.prompt_ids)        # tokens not yet run through the model
    for i, j in runs(swapped):
        # predict positions i..j: inputs so far plus reference tokens i..j-1
        logits, past = _forward(lm, pending + ref[i:j], j - i + 1, past, cache=True)
        passes += 1
        lp = torch.log_softmax(logits, dim=-1)
        for k in range(i, j + 1):
            logprobs.append(float(lp[k - i, ref[k]]))
        inputs.extend(ref[i:j])
        if swapped[j]:
            context = torch.tensor([teacher.prompt_ids + inputs])
            scores = shape(processors, context, logits[-1][None])[0]
            if strategy == "greedy":
                own = int(scores.argmax())
            else:
                own = int(torch.multinomial(torch.softmax(scores, -1), 1, generator=draws))
            inputs.append(own)
        else:
            inputs.append(ref[j])
        pending = [inputs[-1]]
    return ScheduledRun(epsilon=float(epsilon), swapped=swapped, inputs=inputs,
                        input_texts=[lm.token_texts[x] for x in inputs], logprobs=logprobs,
                        logprob=float(sum(logprobs)), forward_passes=passes)


def epsilon_curve(lm: LoadedModel, teacher: TeacherForced, points: int = 11, seed: int = 0, strategy: str = "greedy",
                  temperature: float = 1.0) -> list:
    """[ScheduledRun] for eps = 0, 1/(points-1), ..., 1, all with the same coins."""
    if points < 2:
        raise ConfigError("points", f"points: need at least 2, got {points}")
    return [scheduled_sampling(lm, teacher, k / (points - 1), seed=seed, strategy=strategy, temperature=temperature)
            for k in range(points)]
