"""The way out of a loop: how likely other sampler settings were to leave it, from the trace alone.

At the loop's first repeated step (the first token of its second copy) the run took
the token that starts the repetition. Under another temperature, top-p or min-p the
chance of taking anything else there is 1 - p'(that token), where p' is the recorded
raw distribution reshaped by transformers' own processors (engine.samplers.shaping) with the
run's top-k and repetition penalty kept. No decoding happens: only the step's
recorded logits are reshaped.

A trace records the top-N candidates, not the whole vocabulary. The probability mass
they leave out (usually small at a loop) is spread evenly over the unrecorded tokens:
a stated assumption, reported as `recorded_mass` (1.0 means the grid is exact). With
the model at hand, `step_logits` reads the step's full logits with one forward pass
over the text up to that step (still no decoding) and the grid is exact.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.explain.findings import find_loop
from engine.model import LoadedModel
from engine.samplers.shaping import build_processors

TEMPERATURES = (0.7, 1.0, 1.3, 1.6, 2.0)
COLUMNS = (("none", 0.0), ("top_p", 0.95), ("top_p", 0.8), ("top_p", 0.5),
           ("min_p", 0.05), ("min_p", 0.1), ("min_p", 0.2))
TOKEN_STRATEGIES = ("greedy", "sample")    # runs that draw one token per step
MAX_VOCAB = 2_000_000                       # a vocabulary size above this in a trace file is not believed


@dataclass(frozen=True)
class EscapeGrid:
    step: int                 # the loop's first repeated step
    token_id: int             # the token that began the repetition there
    text: str
    temperatures: list        # rows
    columns: list             # [(kind, value)]: none | top_p | min_p
    probs: list               # [row][column] probability of NOT taking the loop's token
    run_prob: float           # the same under the run's own settings
    recorded_mass: float      # raw mass of the recorded candidates (1.0: exact)

    def best(self) -> tuple:
        """(row, column) of the highest escape probability; ties go to the lower temperature, then the first column."""
        cells = [(r, c) for r in range(len(self.temperatures)) for c in range(len(self.columns))]
        return max(cells, key=lambda rc: (round(self.probs[rc[0]][rc[1]], 9), -rc[0], -rc[1]))

    def config_for(self, base, row: int, column: int):
        """The run's DecodeConfig changed to sampling with the cell's settings (other knobs kept)."""
        kind, value = self.columns[column]
        return base.replace(strategy="sample", temperature=self.temperatures[row],
                            top_p=value if kind == "top_p" else 1.0, min_p=value if kind == "min_p" else 0.0)


def first_repeat(ids: list, **rule):
    """(step, token id) where the first loop first repeats, or None (the loop rule is engine.explain.findings's).

    The rule reports a repeated unit of at least two tokens, so a run of one token (7 7 7 7 7 7) comes
    back as the unit [7, 7]; its true period is one, and the repetition starts at the second 7, not
    the third. The unit's smallest period p is the step after which the text repeats: start + p."""
    found = find_loop(ids, **rule)
    if found is None:
        return None
    start, n, _ = found
    unit = ids[start:start + n]
    period = next(p for p in range(1, n + 1) if n % p == 0 and unit == unit[:p] * (n // p))
    return start + period, ids[start + period]


def completed_logits(step, vocab_size: int | None) -> tuple:
    """(scores, token ids, recorded mass): the recorded raw logits, plus the unrecorded mass spread evenly.

    scores[i] is the logit of token ids[i] for the recorded ones; the rest (id -1) share the missing mass.
    Raises ValueError when the recorded numbers cannot come from a softmax (a damaged trace)."""
    candidates = sorted(step.candidates, key=lambda c: c.rank)
    ids = [c.token_id for c in candidates]
    logits = [c.logit for c in candidates]
    best = candidates[0]
    if not (0 < best.prob <= 1 and math.isfinite(best.logit)):
        raise ValueError(f"the top candidate's probability {best.prob} or logit {best.logit} is unusable")
    log_z = best.logit - math.log(best.prob)          # the softmax normaliser of the full vocabulary
    recorded = sum(c.prob for c in candidates)
    missing = max(0.0, 1.0 - recorded)
    known = isinstance(vocab_size, int) and not isinstance(vocab_size, bool) and len(ids) <= vocab_size <= MAX_VOCAB
    others = vocab_size - len(ids) if known else 1       # an unknown or implausible size: one "other" token
    if missing > 1e-12 and others > 0:
        logits += [log_z + math.log(missing / others)] * others
        ids += [-1] * others
    return torch.tensor(logits, dtype=torch.float32), ids, min(recorded, 1.0)


def reshaped(scores: torch.Tensor, position: dict, context: list, config) -> torch.Tensor:
    """Probabilities after the processors `generate` builds for `config`.

    position maps a token id to its index in `scores`; the penalty sees the recorded tokens only."""
    seen = [position[t] for t in context if t in position]
    if not seen:
        config = config.replace(repetition_penalty=1.0)      # nothing recorded in the context to penalise
    input_ids = torch.tensor([seen or [0]], dtype=torch.long)
    shaped = build_processors(config)(input_ids, scores[None].clone())[0]
    return torch.softmax(shaped, -1)


def escape_probability(scores: torch.Tensor, position: dict, token_id: int, context: list, config) -> float:
    """1 - p(token_id) under `config`'s shaping; for greedy, 1 if the shaped argmax is another token, else 0."""
    probs = reshaped(scores, position, context, config)
    if config.strategy == "greedy":
        return 0.0 if int(probs.argmax()) == position[token_id] else 1.0
    return 1.0 - float(probs[position[token_id]])


@torch.inference_mode()
def step_logits(lm: LoadedModel, trace, step: int, sequence: int = 0) -> torch.Tensor:
    """The full raw logits [vocab] the model gives at `step` of the sequence: one forward pass, no decoding."""
    ids = list(trace.prompt_token_ids) + list(trace.sequences[sequence].token_ids)[:step]
    return lm.model(input_ids=torch.tensor([ids], device=lm.device)).logits[0, -1].to("cpu", torch.float32)


def loop_step(trace, sequence: int = 0) -> int | None:
    """The step escape_grid reads: the first loop's first repeated step, if the trace has one."""
    found = first_repeat(list(trace.sequences[sequence].token_ids))
    return None if found is None or found[0] >= len(trace.steps) else found[0]


def escape_grid(trace, sequence: int = 0, logits: torch.Tensor | None = None, temperatures=TEMPERATURES,
                columns=COLUMNS) -> EscapeGrid | None:
    """The grid for the trace's first loop, or None when there is no loop or the run did not draw tokens.

    logits: the full raw logits at the loop step (step_logits); without them the recorded candidates are used."""
    if trace.config.strategy not in TOKEN_STRATEGIES:
        return None
    ids = list(trace.sequences[sequence].token_ids)
    found = first_repeat(ids)
    if found is None or found[0] >= len(trace.steps):
        return None
    at, token = found
    step = trace.steps[at]
    if logits is None and not any(c.token_id == token for c in step.candidates):
        return None
    if logits is not None:
        scores, score_ids, recorded = logits.float(), list(range(logits.shape[-1])), 1.0
    else:
        try:
            scores, score_ids, recorded = completed_logits(step, trace.model_facts.get("vocab_size"))
        except (ValueError, OverflowError, TypeError):
            return None          # a damaged upload: no grid rather than a wrong one
    context = list(trace.prompt_token_ids) + ids[:at]
    position = {t: i for i, t in enumerate(score_ids) if t >= 0}
    base = trace.config
    sampling = base.replace(strategy="sample")
    probs = [[escape_probability(scores, position, token, context,
                                 sampling.replace(temperature=t, top_p=v if k == "top_p" else 1.0,
                                                  min_p=v if k == "min_p" else 0.0))
              for k, v in columns] for t in temperatures]
    run_prob = escape_probability(scores, position, token, context, base)
    text = step.chosen_texts[0] if step.chosen_ids and step.chosen_ids[0] == token else str(token)
    return EscapeGrid(step=at, token_id=token, text=text, temperatures=list(temperatures), columns=list(columns),
                      probs=probs, run_prob=run_prob, recorded_mass=recorded)
