"""Each sampler card's "see it" link bites on the bundled SmolLM2: decoded with the link's settings, read as
Step by step reads them, its stage removes tokens (a cut) or moves probability (a penalty, a temperature) at
the step the link opens on. References: the step's distribution before the stage (the stage before it, or
the raw candidates) against the one after it."""
from __future__ import annotations

import pytest

from engine import DecodeConfig, decode
from ui.sampler_cards import CARDS, link_settings
from ui.samplers import config_fields
from ui.settings import TABLE, parse

pytestmark = pytest.mark.bundled
MOVES = {"repetition_penalty", "penalties", "dry", "temperature"}     # they reshape; the others cut
MOVED = 0.01           # the least change in a listed candidate's probability that counts as biting


def page_config(settings: dict) -> DecodeConfig:
    """The settings as Step by step turns them into a DecodeConfig (ui.strategy.make_config, ui.samplers)."""
    values = {key: parse(key, text) for key, text in settings.items() if key in TABLE and key not in
              ("prompt", "step", "model")}
    values.setdefault("sampler_order", TABLE["sampler_order"].default)
    fields = {k: v for k, v in values.items() if k in ("strategy", "temperature", "top_k", "top_p", "min_p",
                                                       "repetition_penalty", "seed", "max_new_tokens")}
    fields.update(config_fields(values))
    return DecodeConfig(**fields).validate()


@pytest.mark.parametrize("stage", list(CARDS))
def test_each_cards_link_bites_at_the_step_it_opens(bundled, stage):
    settings = link_settings(stage)
    step = int(settings["step"])
    config = page_config(settings)
    trace = decode(bundled, settings["prompt"], config.replace(max_new_tokens=step))
    recorded = trace.steps[step - 1]
    named = [i for i, s in enumerate(recorded.stages) if s.name == stage]
    assert named, (stage, [s.name for s in recorded.stages])
    i = named[0]
    after = recorded.stages[i]
    before = recorded.stages[i - 1].probs if i else [c.prob for c in recorded.candidates]
    if stage in MOVES:
        assert max(abs(a - b) for a, b in zip(before, after.probs)) >= MOVED, stage
    else:
        assert after.cut_count >= 1 and after.removed_mass > 0, (stage, after.cut_count)
