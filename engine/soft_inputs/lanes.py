"""Several feed-back rules on one prompt and seed, stepped in turn: one step of every lane, then the next.

Each lane is its own runner (engine.strategies.make_runner: a Decoder for greedy and p^T E, a SoftInputDecoder
for the rules of this package) with its own KV cache and its own forward pass per step, so each step's wall time
is that lane's own (a batch would share one pass among the lanes). Stepping in turn lets a page show every lane
as it grows, and a stop after any step keeps what every lane has so far.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from ..config import DecodeConfig
from ..errors import ConfigError
from ..model import LoadedModel
from ..strategies import make_runner
from ..trace import Step, Trace
from .decoder import SoftInputDecoder

OnStep = Callable[[int, Step], bool | None]   # (lane index, its new step) -> False to stop


@dataclass
class LaneRun:
    """One lane's result: its trace, and per step the vector it fed to the next step as the model received it
    (float32, CPU; the probes feed them again)."""
    trace: Trace
    vectors: list = field(default_factory=list)      # [torch.Tensor [hidden]]


def input_vector(lm: LoadedModel, fed: tuple) -> torch.Tensor:
    """[hidden] the model's input for a runner's next input ("ids", "embeds" or "hidden"), float32 on the CPU."""
    kind, value = fed
    if kind == "hidden":
        return value.reshape(-1).to("cpu", torch.float32)
    return lm.model_inputs(kind, value).reshape(-1).to("cpu", torch.float32)


def lane_vectors(lm: LoadedModel, runner) -> list:
    """Per step, the vector that step fed to the next one."""
    if isinstance(runner, SoftInputDecoder):
        return list(runner.fed_vectors)
    inputs = runner._inputs[1:] + ([runner.next_input] if runner.next_input is not None else [])
    return [input_vector(lm, fed) for fed in inputs[:len(runner.steps)]]


class SoftLanes:
    """Lanes of one prompt under several configs (no beam search, no speculative decoding)."""

    def __init__(self, lm: LoadedModel, prompt: str, configs: list[DecodeConfig]):
        if not configs:
            raise ConfigError("lanes", "lanes: give at least one decode setting")
        for config in configs:
            if config.strategy in ("beam", "speculative"):
                raise ConfigError("strategy", f"strategy: {config.strategy} is not a single-sequence lane")
            if config.chat != configs[0].chat:
                raise ConfigError("chat", "chat: every lane must read the same prompt (chat on or off for all)")
        self.lm = lm
        self.runners = [make_runner(lm, prompt, config) for config in configs]

    @property
    def finished(self) -> bool:
        return all(r.finished for r in self.runners)

    @torch.inference_mode()
    def step(self, on_step: OnStep | None = None) -> bool:
        """One step of every running lane; False once all have ended, or when `on_step` asked to stop."""
        for i, runner in enumerate(self.runners):
            if runner.finished:
                continue
            step = runner.step()
            if on_step is not None and on_step(i, step) is False:
                return False
        return not self.finished

    def run(self, on_step: OnStep | None = None) -> list[LaneRun]:
        while self.step(on_step):
            pass
        return self.results()

    def results(self) -> list[LaneRun]:
        """Every lane's steps so far."""
        return [LaneRun(r.trace(), lane_vectors(self.lm, r)) for r in self.runners]
