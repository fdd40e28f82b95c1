"""Teacher forcing on a served model: score a reference continuation token by token, given the true prefix.

Two ways, by what the server offers:
  - vLLM's `prompt_logprobs`: one request scores every token of prompt + reference, exactly
    (the reference token's own log-probability and rank come back even outside the top-N);
  - any other completions server (llama.cpp): one request per reference position, asking for the
    next token's top-N after the true prefix. A reference token outside that top-N has no number
    from the server: it gets rank N + 1 and, as its log-probability, the N-th one, an upper bound
    (`TeacherForced` then says so through `bounded`).
The token boundaries come from the server's own tokenizer (an echoed completion's text offsets).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ..errors import ConfigError
from .client import Server, ServedError, answers_checked
from engine.inside.teacher import Scored
from ..trace import Neighbour

TOP = 5


@dataclass(frozen=True)
class ServedTeacherForced:
    """Like `teacher.TeacherForced`, from a server: positions [Scored]; bounded: indices whose
    log-probability is only an upper bound (the token was not in the server's top-N)."""
    positions: list
    logprob: float
    bounded: list
    exact: bool              # every number came from the server (vLLM's prompt_logprobs)
    top_n: int               # candidates asked for per position
    requests: int
    seconds: float


def served_teacher_force(server: Server, prompt: str, reference: str, top_n: int = 20) -> ServedTeacherForced:
    """Score `reference` after `prompt` on the server (see the module's docstring for the two ways)."""
    with answers_checked(server):
        return _teacher_force(server, prompt, reference, top_n)


def _teacher_force(server: Server, prompt: str, reference: str, top_n: int) -> ServedTeacherForced:
    if not isinstance(reference, str) or not reference.strip():
        raise ConfigError("reference", "reference: is empty; type the text the model should be scored on")
    if not prompt:
        raise ConfigError("prompt", "prompt: is empty; type some text for the model to continue")
    t0 = time.perf_counter()
    top_n = min(top_n, server.max_logprobs)
    whole = prompt + reference
    _, echoed, _ = server.complete(whole, max_tokens=1, logprobs=1, echo=True)
    pieces = [(p.offset, p.text) for p in echoed if p.offset is not None and len(prompt) <= p.offset < len(whole)]
    if not pieces or any(p.offset is None for p in echoed):
        raise ServedError(f"server at {server.url} did not echo the prompt's tokens with their offsets, "
                          "so the reference cannot be split into tokens")
    straddling = [p for p in echoed if p.offset is not None and p.offset < len(prompt) < p.offset + len(p.text)]
    if straddling:
        raise ConfigError("reference", "reference: its first token merges with the prompt's last one on this server's "
                                       "tokenizer; start the reference at a word boundary (e.g. with a space)")
    rows = server.prompt_logprobs(whole, top_n)
    if rows is not None:
        return _from_prompt_logprobs(server, rows, pieces, top_n, t0)
    positions, bounded = [], []
    for index, (offset, text) in enumerate(pieces):
        _, answer, _ = server.complete(whole[:offset], max_tokens=1, logprobs=top_n)
        if not answer:
            raise ServedError(f"server at {server.url} gave no distribution after the prefix at token {index + 1}")
        top = answer[0].top
        listed = dict(top)
        if text in listed:
            logprob = listed[text]
            rank = 1 + sum(1 for _, lp in top if lp > logprob)
        else:
            logprob, rank = (top[-1][1] if top else 0.0), len(top) + 1
            bounded.append(index)
        positions.append(Scored(index=index, token_id=_id(server, text), text=text, prob=math.exp(logprob),
                                logprob=logprob, rank=rank, entropy=_listed_entropy([lp for _, lp in top]),
                                top=[Neighbour(_id(server, t), t, math.exp(lp)) for t, lp in top[:TOP]]))
    return ServedTeacherForced(positions=positions, logprob=sum(p.logprob for p in positions), bounded=bounded,
                               exact=False, top_n=top_n, requests=1 + len(pieces), seconds=time.perf_counter() - t0)


def _id(server: Server, text: str) -> int:
    found = server.token_id(text)
    return -1 if found is None else found


def _listed_entropy(logprobs: list) -> float:
    """Entropy of the listed tokens plus one bucket for the rest: what a top-N view can say (a lower bound
    on the full distribution's entropy)."""
    probs = [math.exp(lp) for lp in logprobs]
    rest = max(0.0, 1.0 - sum(probs))
    return -sum(p * math.log(p) for p in probs if p > 0) - (rest * math.log(rest) if rest > 0 else 0.0)


def _from_prompt_logprobs(server: Server, rows: list, pieces: list, top_n: int, t0: float) -> ServedTeacherForced:
    """vLLM: rows[i] is the distribution that scored prompt token i; the reference is the last tokens."""
    ids = server.tokenize("".join(text for _, text in pieces))     # only for the ids; texts come from the echo
    first = len(rows) - len(pieces)
    if first < 0:
        raise ServedError(f"server at {server.url} gave prompt_logprobs for {len(rows)} tokens; the prompt and "
                          f"reference hold more than that")
    positions = []
    for index, ((_, text), row) in enumerate(zip(pieces, rows[first:])):
        if not row:
            raise ServedError(f"server at {server.url} gave no prompt logprobs at reference token {index + 1}")
        own = None
        if ids is not None and index < len(ids) and ids[index] in row:
            own = ids[index]
        else:
            own = next((k for k, (_, _, t) in row.items() if t == text), None)
        if own is None:
            raise ServedError(f"server at {server.url} did not score the reference token {text!r}")
        logprob, rank, _ = row[own]
        top = sorted(row.items(), key=lambda item: -item[1][0])
        positions.append(Scored(index=index, token_id=own, text=text, prob=math.exp(logprob), logprob=logprob,
                                rank=rank or 1 + sum(1 for _, (lp, _, _) in top if lp > logprob),
                                entropy=_listed_entropy([lp for _, (lp, _, _) in top]),
                                top=[Neighbour(k, t, math.exp(lp)) for k, (lp, _, t) in top[:TOP]]))
    return ServedTeacherForced(positions=positions, logprob=sum(p.logprob for p in positions), bounded=[],
                               exact=True, top_n=top_n, requests=2, seconds=time.perf_counter() - t0)
