"""Where did a run go wrong? Findings read off a Trace's own probabilities, no model needed.

`explain(trace)` looks at every returned sequence and reports, as plain JSON-able values:

  1. low-probability picks: steps whose token had raw probability under `threshold`
     (default 0.02) or raw rank beyond `max_rank` (default 10), with the rank and the
     raw mass of the tokens ranked above it (how much the model preferred something else);
  2. the first repetition loop: the earliest step s from which some n-gram
     (n = 2..8) appears at least three times back to back, ids[s:s+n] == ids[s+n:s+2n]
     == ids[s+2n:s+3n]; the smallest such n is reported, with how often it repeats;
  3. entropy events: a step whose raw entropy H (nats) moves far from the running median
     m of the raw entropies of the previous `entropy_window` (8) steps. Nothing is judged
     before `entropy_min_history` (3) earlier steps exist. With ratio r = 2 and delta d = 1 nat:
        jump      when H >= r * m  and  H - m >= d   (at least twice as unsure, by 1 nat or more)
        collapse  when H <= m / r  and  m - H >= d   (at least twice as sure, by 1 nat or more)
     The median, not the mean, so one odd step does not move the baseline; the absolute
     delta keeps tiny entropies (0.01 -> 0.03 nats) from counting as a jump. Consecutive
     steps of the same kind are one event, reported at the first step with their count;
  4. the first departure from the greedy path. The greedy path is the sequence greedy
     decoding with the same settings would produce from the same prompt. Until the first
     departure this sequence shares its prefix with that path, so the step's argmax IS
     greedy's choice, and the first step whose token is not the argmax is exactly where the
     sequence leaves the greedy path. After it the prefixes differ: a later step whose token
     is not that step's argmax is only "off the argmax for its own prefix" (counted in
     `off_argmax_steps`), not a second departure from the greedy sequence. The argmax is the
     raw rank-1 token; with a repetition penalty it is the penalised argmax (greedy applies
     the penalty too; temperature, top-k, top-p and min-p never change the argmax).
     Soft and (non-hard) Gumbel runs feed back a mixture of embeddings, not a token, so
     from the step after the first mixture their prefix is not greedy's even when every
     token is the argmax; the departure is reported there as `mixture` (and `unknown`).

For beam traces a sequence is a path in the beam tree. A step's recorded candidates are
those of the beam that the best running beam extends, so a step's raw distribution is known
for a sequence only where the sequence's parent node is that beam; elsewhere rank, mass above and entropy are None
and the token's probability comes from its tree node. The departure uses the tree: a node
leaves the argmax when a sibling (same parent) has a higher log-probability.

`with_findings(trace)` returns a new Trace with the findings stored in
`trace.findings["explain"]`, which the schema-1 JSON already carries.
`replay_greedy(lm, trace, step)` re-decodes with the sampled prefix forced and greedy after.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from statistics import median

from engine.model import LoadedModel
from engine.trace import Trace

FINDINGS_KEY = "explain"
FINDINGS_VERSION = 1


@dataclasses.dataclass(frozen=True)
class _Position:
    """What is known about one generated token of one sequence."""
    step: int
    token_id: int
    text: str
    prob: float | None          # raw probability of the token (None if unknown)
    rank: int | None            # raw rank, 1 = most likely (None if unknown)
    mass_above: float | None    # raw mass of the tokens ranked above it
    mass_above_exact: bool      # all tokens ranked above were recorded
    entropy: float | None       # raw entropy of the step's distribution, nats
    argmax_id: int | None       # greedy's choice given this sequence's prefix
    argmax_text: str | None
    argmax_prob: float | None
    forced: bool                # the token was forced (a branch), not chosen


# ---- the findings ------------------------------------------------------------------
def explain(trace, threshold: float = 0.02, max_rank: int = 10, min_n: int = 2, max_n: int = 8,
            min_repeats: int = 3, entropy_window: int = 8, entropy_min_history: int = 3,
            entropy_ratio: float = 2.0, entropy_delta: float = 1.0) -> dict:
    """Findings for every sequence of `trace` (see the module docstring for each rule)."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    if max_rank < 1:
        raise ValueError(f"max_rank must be at least 1, got {max_rank}")
    if not 1 <= min_n <= max_n:
        raise ValueError(f"min_n and max_n must satisfy 1 <= min_n <= max_n, got {min_n}, {max_n}")
    if min_repeats < 2:
        raise ValueError(f"min_repeats must be at least 2, got {min_repeats}")
    if entropy_window < 1 or entropy_min_history < 1:
        raise ValueError("entropy_window and entropy_min_history must be at least 1")
    if entropy_ratio <= 1 or entropy_delta < 0:
        raise ValueError(f"entropy_ratio must be > 1 and entropy_delta >= 0, got {entropy_ratio}, {entropy_delta}")
    rule = dict(threshold=threshold, max_rank=max_rank, min_n=min_n, max_n=max_n, min_repeats=min_repeats,
                entropy_window=entropy_window, entropy_min_history=entropy_min_history,
                entropy_ratio=entropy_ratio, entropy_delta=entropy_delta)
    greedy = trace.config.strategy == "greedy" and not trace.forced
    mixture = trace.config.strategy == "soft" or (trace.config.strategy == "gumbel" and not trace.config.hard)
    sequences = []
    for index, sequence in enumerate(trace.sequences):
        positions = _positions(trace, index)
        ids = list(sequence.token_ids)
        departure, off_argmax = _departure(positions, mixture)
        sequences.append({
            "sequence": index,
            "length": len(ids),
            "low_prob_picks": _low_prob_picks(positions, threshold, max_rank),
            "loop": _first_loop(ids, positions, min_n, max_n, min_repeats),
            "entropy_events": _entropy_events(positions, entropy_window, entropy_min_history,
                                              entropy_ratio, entropy_delta),
            "greedy_departure": departure,
            "off_argmax_steps": off_argmax,
            "known_steps": sum(p.rank is not None for p in positions),
        })
    return {"version": FINDINGS_VERSION, "rule": rule, "strategy": trace.config.strategy,
            "greedy_run": greedy, "sequences": sequences}


def with_findings(trace, **rule):
    """A new Trace whose `findings["explain"]` holds `explain(trace, **rule)`; other findings are kept."""
    return dataclasses.replace(trace, findings={**trace.findings, FINDINGS_KEY: explain(trace, **rule)})


def findings_of(trace, **rule) -> dict:
    """The findings of `trace` under `rule`, always computed afresh.

    Findings stored in a trace file are for readers of the file; a file may be hand-edited
    or written by another version, so what is shown is recomputed from the steps.
    """
    return explain(trace, **rule)


def default_rule() -> dict:
    """explain's keyword defaults: the rule used when none is given."""
    params = inspect.signature(explain).parameters
    return {name: p.default for name, p in params.items() if p.default is not inspect.Parameter.empty}


def timeline(findings: dict, sequence: int = 0) -> list:
    """The findings of one sequence as events sorted by step: {step, kind, token_id, text, ...details}.

    kind is one of: departure, low_prob, loop, entropy_jump, entropy_collapse. At the same
    step the order is departure, low_prob, loop, then entropy events.
    """
    found = findings["sequences"][sequence]
    events = []
    if found["greedy_departure"] is not None:
        events.append({"kind": "departure", **found["greedy_departure"]})
    for pick in found["low_prob_picks"]:
        events.append({"kind": "low_prob", **pick})
    if found["loop"] is not None:
        loop = found["loop"]
        events.append({"kind": "loop", "step": loop["start"], "token_id": loop["token_ids"][0],
                       "text": loop["texts"][0], **{k: v for k, v in loop.items() if k != "start"}})
    for event in found["entropy_events"]:
        events.append({**event, "kind": f"entropy_{event['kind']}"})
    order = {"departure": 0, "low_prob": 1, "loop": 2, "entropy_jump": 3, "entropy_collapse": 3}
    return sorted(events, key=lambda e: (e["step"], order[e["kind"]]))


def flagged_steps(findings: dict, sequence: int = 0) -> set:
    """Steps worth outlining in the coloured text: picks, the departure, entropy events, the loop's start."""
    return {event["step"] for event in timeline(findings, sequence)}


# ---- what is known per position ----------------------------------------------------
def _positions(trace, index: int) -> list:
    sequence = trace.sequences[index]
    if trace.nodes and sequence.node_id is not None:
        return _beam_positions(trace, sequence)
    penalised = trace.config.repetition_penalty != 1.0
    out = []
    for i, token in enumerate(sequence.token_ids):
        step = trace.steps[i] if i < len(trace.steps) else None
        if step is None or not step.chosen_ids or step.chosen_ids[0] != token:
            out.append(_unknown(i, token, step))
            continue
        out.append(_from_candidates(i, token, step, penalised, forced=i in trace.forced))
    return out


def _unknown(i, token, step, prob=None, argmax=None) -> _Position:
    text = step.chosen_texts[0] if step is not None and step.chosen_ids and step.chosen_ids[0] == token else ""
    argmax_id, argmax_text, argmax_prob = argmax or (None, None, None)
    return _Position(step=i, token_id=token, text=text, prob=prob, rank=None, mass_above=None,
                     mass_above_exact=False, entropy=None, argmax_id=argmax_id, argmax_text=argmax_text,
                     argmax_prob=argmax_prob, forced=False)


def _from_candidates(i, token, step, penalised: bool, forced: bool, text: str | None = None) -> _Position:
    """The token's raw prob, rank and mass above from the step's recorded candidates."""
    by_rank = sorted(step.candidates, key=lambda c: c.rank)
    chosen = next((c for c in by_rank if c.token_id == token), None)
    # greedy's choice: the raw rank 1, or with a repetition penalty the largest penalised prob
    top = max(by_rank, key=lambda c: (c.shaped_prob, -c.rank)) if penalised else by_rank[0]
    if chosen is None:       # beam candidates need not include the token
        return _Position(step=i, token_id=token, text=text or "", prob=None, rank=None, mass_above=None,
                         mass_above_exact=False, entropy=_finite_or_none(step.entropy), argmax_id=top.token_id,
                         argmax_text=top.text, argmax_prob=top.prob, forced=forced)
    above = [c for c in by_rank if c.rank < chosen.rank]
    return _Position(step=i, token_id=token, text=chosen.text, prob=chosen.prob, rank=chosen.rank,
                     mass_above=sum(c.prob for c in above), mass_above_exact=len(above) == chosen.rank - 1,
                     entropy=_finite_or_none(step.entropy), argmax_id=top.token_id, argmax_text=top.text,
                     argmax_prob=top.prob, forced=forced)


def _beam_positions(trace, sequence) -> list:
    path = trace.path(sequence.node_id)
    children = {}
    for n in trace.nodes:
        children.setdefault(n.parent, []).append(n)
    raw_logprobs = trace.config.repetition_penalty == 1.0   # node logprobs are penalised otherwise
    out = []
    for node in path:
        i = node.step
        step = trace.steps[i] if 0 <= i < len(trace.steps) else None
        # the recorded candidates are those of the beam that the best running beam after step i extends
        best = trace.nodes_by_id.get(step.beam_node_ids[0]) if step is not None and step.beam_node_ids else None
        best_parent = best.parent if best is not None else None
        # the argmax among this parent's continuations (the argmax is always among them: see module docstring)
        siblings = [s for s in children.get(node.parent, []) if s.step == i]
        top = max(siblings, key=lambda s: s.logprob)
        argmax = (top.token_id, top.text, math.exp(top.logprob) if raw_logprobs else None)
        if step is not None and node.parent == best_parent:
            known = _from_candidates(i, node.token_id, step, trace.config.repetition_penalty != 1.0, False, node.text)
            prob = known.prob if known.prob is not None else (math.exp(node.logprob) if raw_logprobs else None)
            out.append(dataclasses.replace(known, text=node.text, prob=prob, argmax_id=argmax[0],
                                           argmax_text=argmax[1], argmax_prob=argmax[2]))
        else:
            prob = math.exp(node.logprob) if raw_logprobs else None
            out.append(dataclasses.replace(_unknown(i, node.token_id, None, prob, argmax), text=node.text))
    return out


def _finite_or_none(value):
    return value if isinstance(value, int | float) and math.isfinite(value) else None


# ---- the four rules ----------------------------------------------------------------
def _low_prob_picks(positions, threshold: float, max_rank: int) -> list:
    picks = []
    for p in positions:
        low_prob = p.prob is not None and p.prob < threshold
        deep = p.rank is not None and p.rank > max_rank
        if not (low_prob or deep):
            continue
        picks.append({"step": p.step, "token_id": p.token_id, "text": p.text, "prob": p.prob, "rank": p.rank,
                      "mass_above": p.mass_above, "mass_above_exact": p.mass_above_exact,
                      "reasons": [r for r, hit in (("prob", low_prob), ("rank", deep)) if hit],
                      "forced": p.forced})
    return picks


def find_loop(ids: list, min_n: int = 2, max_n: int = 8, min_repeats: int = 3):
    """(start, n, repeats) of the earliest back-to-back repetition, smallest n at that start; else None.

    repeats counts the whole copies of ids[start:start+n] that follow one another from start.
    """
    for start in range(len(ids)):
        for n in range(min_n, max_n + 1):
            if start + n * min_repeats > len(ids):
                break
            unit = ids[start:start + n]
            repeats = 1
            while ids[start + repeats * n:start + (repeats + 1) * n] == unit:
                repeats += 1
            if repeats >= min_repeats:
                return start, n, repeats
    return None


def _first_loop(ids, positions, min_n, max_n, min_repeats):
    found = find_loop(ids, min_n, max_n, min_repeats)
    if found is None:
        return None
    start, n, repeats = found
    texts = [positions[i].text if i < len(positions) else "" for i in range(start, start + n)]
    return {"start": start, "n": n, "repeats": repeats, "end": start + n * repeats,
            "token_ids": ids[start:start + n], "texts": texts}


def _entropy_events(positions, window: int, min_history: int, ratio: float, delta: float) -> list:
    """Jumps and collapses against the running median; a streak of one kind is one event at its first step."""
    events = []
    history = []            # raw entropies of earlier steps where the distribution is known
    previous_kind = None
    for p in positions:
        if p.entropy is None:
            continue
        kind = None
        if len(history) >= min_history:
            m = median(history[-window:])
            if p.entropy >= ratio * m and p.entropy - m >= delta:
                kind = "jump"
            elif p.entropy <= m / ratio and m - p.entropy >= delta:
                kind = "collapse"
            if kind is not None and kind == previous_kind:
                events[-1]["steps"] += 1      # the streak goes on
            elif kind is not None:
                events.append({"step": p.step, "kind": kind, "token_id": p.token_id, "text": p.text,
                               "entropy": p.entropy, "median": m, "steps": 1})
        previous_kind = kind
        history.append(p.entropy)
    return events


def _departure(positions, mixture: bool = False):
    """(the first step off the greedy path or None, how many steps are off their own argmax).

    mixture: the run feeds back a mixture of embeddings (soft, gumbel without hard) after
    every step it did not force, so from the next step on its prefix is not greedy's even
    when its tokens are the argmax: the departure is then "unknown" from that step.
    """
    first = None
    off = 0
    for i, p in enumerate(positions):
        if p.argmax_id is not None and p.token_id != p.argmax_id:
            off += 1
        if first is not None:
            continue
        if p.argmax_id is None:
            # greedy's choice is unknown here, so later departures cannot be placed on the greedy path
            first = _departure_record(p, unknown=True)
        elif p.token_id != p.argmax_id:
            first = _departure_record(p)
        elif mixture and not p.forced and i + 1 < len(positions):
            first = _departure_record(positions[i + 1], unknown=True, mixture=True)
    return first, off


def _departure_record(p: _Position, unknown: bool = False, mixture: bool = False) -> dict:
    known = not unknown
    return {"step": p.step, "token_id": p.token_id, "text": p.text, "unknown": unknown, "mixture": mixture,
            "argmax_id": p.argmax_id if known else None, "argmax_text": p.argmax_text if known else None,
            "prob": p.prob, "argmax_prob": p.argmax_prob if known else None, "forced": p.forced}


# ---- replay ------------------------------------------------------------------------
def replay_greedy(lm: LoadedModel, trace: Trace, step: int, sequence: int = 0, keep_pick: bool = True) -> Trace:
    """Decode again: the sequence's own tokens forced up to `step`, greedy from then on.

    keep_pick=True forces steps 0..step (the token at `step` stays, only later randomness is
    removed); keep_pick=False forces 0..step-1, so greedy chooses at `step` itself. Comparing
    the two shows whether the pick at `step` led to what followed. Settings other than the
    strategy (penalty, length, chat, seed) are the trace's own.
    """
    from engine.strategies import decode

    ids = trace.sequences[sequence].token_ids
    if not 0 <= step < len(ids):
        raise ValueError(f"step must be between 0 and {len(ids) - 1}, got {step}")
    last = step + 1 if keep_pick else step
    forced = {i: ids[i] for i in range(last)}
    return decode(lm, trace.prompt, trace.config.replace(strategy="greedy"), forced=forced)


def replay_summary(original, replay, step: int, sequence: int = 0, **rule) -> dict:
    """How a replay compares with the original: where they part, and the replay's loop."""
    a = original.sequences[sequence].token_ids
    b = replay.sequences[0].token_ids
    parted = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if parted is None and len(a) != len(b):
        parted = min(len(a), len(b))
    found = explain(replay, **rule)["sequences"][0]
    return {"step": step, "parts_at": parted, "loop": found["loop"], "text": replay.sequences[0].text,
            "token_ids": list(b), "low_prob_picks": len(found["low_prob_picks"])}


# ---- plain text, for the CLI ---------------------------------------------------------
def format_findings(trace, findings: dict | None = None) -> str:
    """The findings as lines of text under the CLI table (steps numbered from 1, as in the table)."""
    findings = findings or findings_of(trace)
    rule = findings["rule"]
    lines = [f"what happened (unlikely: p < {rule['threshold']} or rank > {rule['max_rank']}; loop: "
             f"{rule['min_n']}..{rule['max_n']} tokens {rule['min_repeats']}x back to back; entropy against the "
             f"median of the last {rule['entropy_window']} steps)"]
    for index in range(len(findings["sequences"])):
        events = timeline(findings, index)
        if len(findings["sequences"]) > 1:
            lines.append(f"[{index}]")
        if not events:
            lines.append("  nothing stands out")
        for event in events:
            lines.append(f"  step {event['step'] + 1:>4}  {_describe(event)}")
    return "\n".join(lines)


def _describe(event: dict) -> str:
    kind, token = event["kind"], _quoted(event.get("text"))
    if kind == "departure":
        if event["mixture"]:
            return f"{token}: from here the model reads a mixture of embeddings, not greedy's token"
        if event["unknown"]:
            return f"{token}: greedy's choice not recorded from here on"
        how = "forced" if event["forced"] else "leaves the greedy path"
        return f"{token}: {how}; greedy takes {_quoted(event['argmax_text'])} (p {_prob(event['argmax_prob'])})"
    if kind == "low_prob":
        rank = "?" if event["rank"] is None else event["rank"]
        above = "?" if event["mass_above"] is None else (
            f"{'>=' if not event['mass_above_exact'] else ''}{event['mass_above']:.3f}")
        how = "unlikely token, forced" if event.get("forced") else "unlikely pick"
        return f"{token}: {how}, p {_prob(event['prob'])}, rank {rank}, mass ranked above {above}"
    if kind == "loop":
        span = _quoted("".join(event["texts"]))
        return f"{span}: loop, {event['n']} tokens repeated {event['repeats']}x, through step {event['end']}"
    direction = "jumps" if kind == "entropy_jump" else "collapses"
    streak = "" if event["steps"] == 1 else f" for {event['steps']} steps"
    return f"{token}: entropy {direction} to {event['entropy']:.2f} nats (median {event['median']:.2f}){streak}"


def _quoted(text) -> str:
    return repr(text if text is not None else "")


def _prob(value) -> str:
    return "?" if value is None else f"{value:.4f}"
