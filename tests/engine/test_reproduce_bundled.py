"""The bundled SmolLM2 in bfloat16, alone and inside batches: the alone run twice is bitwise equal, and every step
where a batched run picks another token than the alone run is one the detector called fragile. Whether a flip
happens at all depends on the CPU and its libraries, so it is not asserted (on the machine this was written on,
the batches part from the alone run at step 12 of this prompt)."""
from __future__ import annotations

import numpy as np
import torch

from engine.reproduce import StudySettings, run_study

PROMPT = "Tell me about Richard Feynman."


def test_bundled_bfloat16_flips_are_all_flagged(bundled):
    study = run_study(bundled, PROMPT, StudySettings(max_new_tokens=16, batch_sizes=(1, 2, 4), dtype="bfloat16",
                                                     chat=True), what_if=False)
    assert study.comparisons[1].status == "identical"
    assert torch.equal(study.runs[0].logits, study.runs[1].logits)
    reference = study.runs[0].logits.float().numpy()
    for run, result in zip(study.runs[2:], study.comparisons[2:]):
        logits = run.logits.float().numpy()
        last = min(len(reference), len(logits)) if result.first_divergence is None else result.first_divergence + 1
        for t in range(last):
            if int(np.argmax(reference[t])) != int(np.argmax(logits[t])):
                assert result.steps[t].fragile, (run.label, t)
        if result.first_divergence is not None:          # a text that parted did so at a fragile step
            assert result.steps[result.first_divergence].fragile
