"""A study: the prompt alone (the reference), alone again, inside a batch of every size asked for, and (when asked)
in verify passes; each run compared with the reference; the closest call; and a what-if at that step.

The what-if is labelled as such everywhere it is shown: it forces the reference's runner-up at the most fragile
step and decodes on from there alone. It is what a flip there *would* produce, not something any run did.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import ConfigError
from ..model import LoadedModel
from ..tokens import encode_prompt
from .compare import Comparison, compare
from .runs import Picker, RunSpec, decode_run
from .settings import MAX_PROMPT_TOKENS, StudySettings


@dataclass(frozen=True)
class Closest:
    """The step where a flip came nearest: the smallest margin against twice the change, over every run."""
    step: int
    run: int                        # the run whose change it was (0: none changed, the reference's own margin)
    margin: float
    delta: float

    @property
    def ratio(self) -> float:
        """margin / (2 max |Δ|): at most 1 means fragile; inf when nothing changed."""
        return self.margin / (2 * self.delta) if self.delta > 0 else float("inf")


@dataclass(frozen=True)
class WhatIf:
    step: int                       # the forced step (0-based)
    chosen_id: int                  # what the reference picked there
    forced_id: int                  # the runner-up, forced
    token_ids: list                 # the whole what-if continuation: the reference's prefix, the forced token, more
    text: str


@dataclass
class Study:
    model: str
    prompt: str
    prompt_ids: list
    settings: StudySettings
    runs: list                      # [Run]; runs[0] is the reference
    comparisons: list               # [Comparison], one per run (the reference against itself first)
    texts: list                     # each run's continuation as text
    closest: Closest | None = None
    what_if: WhatIf | None = None

    @property
    def picker(self) -> Picker:
        return Picker(self.settings.temperature, self.settings.seed)

    def to_dict(self) -> dict:
        """The JSON: `runs` (each with its settings, tokens, logits hash and steps) and `first_divergence`, one per
        run (null when none), at the top level."""
        s = self.settings
        runs = []
        for run, comparison, text in zip(self.runs, self.comparisons, self.texts):
            spec = run.spec
            runs.append({
                "label": run.label, "model": self.model, "prompt": self.prompt,
                "batch_size": spec.batch_size, "fill": spec.fill, "prefill": spec.prefill, "dtype": spec.dtype,
                "invariant": spec.invariant, "verify": spec.verify, "temperature": s.temperature, "seed": s.seed,
                "token_ids": list(run.token_ids), "text": text, "logits_sha256": comparison.logits_sha256,
                "status": comparison.status, "first_divergence": comparison.first_divergence,
                "seconds": round(run.seconds, 4), "forward_passes": run.passes,
                "steps": [{"max_abs_delta": c.max_abs_delta, "where": c.where, "margin": c.margin,
                           "top2_ids": list(c.top2_ids), "fragile": c.fragile} for c in comparison.steps],
            })
        return {"runs": runs, "first_divergence": [c.first_divergence for c in self.comparisons]}


def run_specs(settings: StudySettings) -> list:
    """[(label, RunSpec)]: the reference (alone, whole prefill, one-token steps), then one run per batch size, then
    the verify run."""
    s = settings
    specs = [("alone", RunSpec(1, s.fill, 0, s.dtype, s.invariant))]
    for size in s.batch_sizes:
        spec = RunSpec(size, s.fill, s.chunk, s.dtype, s.invariant)
        label = ("alone again" if spec == specs[0][1] else f"batch of {size}" if size > 1
                 else f"alone, {spec.prefill} prefill")
        specs.append((label, spec))
    if s.verify:
        specs.append((f"verify {s.verify}", RunSpec(1, s.fill, 0, s.dtype, s.invariant, verify=s.verify)))
    return specs


def prompt_ids_for(lm: LoadedModel, prompt: str, settings: StudySettings) -> list:
    ids = encode_prompt(lm, prompt, settings.chat, settings.max_new_tokens)
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ConfigError("prompt", f"prompt: is {len(ids):,} tokens; a study repeats it in every row of every "
                                    f"batch, so at most {MAX_PROMPT_TOKENS} tokens")
    return ids


def run_study(lm: LoadedModel, prompt: str, settings: StudySettings, *, what_if: bool = True, keep_logits: bool = True,
              progress: Callable[[int, int, str], None] | None = None) -> Study:
    """Every run of the study, compared with the reference; progress(done, total, label) before each run.
    keep_logits False: each run's logits are dropped once compared (a page keeps the numbers it shows, not
    steps x vocabulary floats per run)."""
    settings.validate()
    ids = prompt_ids_for(lm, prompt, settings)
    picker = Picker(settings.temperature, settings.seed)
    specs = run_specs(settings)
    total = len(specs) + (1 if what_if else 0)
    runs = []
    for i, (label, spec) in enumerate(specs):
        if progress:
            progress(i, total, label)
        drafts = runs[0].token_ids if runs else None
        runs.append(decode_run(lm, ids, spec, settings.max_new_tokens, picker, drafts=drafts, label=label))
    comparisons = [compare(runs[0], run, picker) for run in runs]
    texts = [continuation_text(lm, run.token_ids) for run in runs]
    study = Study(lm.name, prompt, ids, settings, runs, comparisons, texts)
    study.closest = closest_call(comparisons)
    if what_if and study.closest is not None:
        if progress:
            progress(len(specs), total, "what-if")
        study.what_if = fork(lm, study, study.closest.step)
    if not keep_logits:
        for run in runs:
            run.logits = run.logits[:0]
    return study


def continuation_text(lm: LoadedModel, token_ids: list) -> str:
    return lm.tokenizer.decode(token_ids, skip_special_tokens=False)


def closest_call(comparisons: list[Comparison]) -> Closest | None:
    """The step with the smallest margin / (2 max |Δ|) over the runs' comparable steps; when no run changed any
    logit, the reference's smallest margin."""
    best = None
    for r, comparison in enumerate(comparisons[1:], start=1):
        for t, check in enumerate(comparison.steps):
            if check.max_abs_delta:
                ratio = check.margin / (2 * check.max_abs_delta)
                if best is None or ratio < best[0]:
                    best = (ratio, Closest(t, r, check.margin, check.max_abs_delta))
    if best is not None:
        return best[1]
    steps = comparisons[0].steps if comparisons else []
    if not steps:
        return None
    t = min(range(len(steps)), key=lambda i: steps[i].margin)
    return Closest(t, 0, steps[t].margin, 0.0)


def fork(lm: LoadedModel, study: Study, step: int) -> WhatIf:
    """The reference's tokens up to `step`, its runner-up forced there, then decoded on alone like the reference."""
    reference, check = study.runs[0], study.comparisons[0].steps[step]
    chosen, forced = check.top2_ids
    prefix = list(reference.token_ids[:step]) + [forced]
    rest = study.settings.max_new_tokens - len(prefix)
    tokens = list(prefix)
    if rest > 0 and forced not in lm.eos_token_ids:
        more = decode_run(lm, study.prompt_ids + prefix, reference.spec, rest, study.picker.later(len(prefix)))
        tokens += more.token_ids
    return WhatIf(step, chosen, forced, tokens, continuation_text(lm, tokens))
