"""Several feed-back rules on one prompt and seed, stepped in turn: one step of every lane, then the next.

Each lane is a runner (engine.strategies.make_runner: a Decoder for greedy, a SoftInputDecoder for the rules of
this package). Two ways to run them:
  - batched (the page): as engine.decoding.lanes.LaneBatch does, one prefill copied to a KV row per lane, then one
    forward pass per step with every lane's input as one row of `inputs_embeds` (a hidden state as it is, anything else
    through `LoadedModel.model_inputs`); each lane chooses from its own row. Equal to each lane alone up to float
    rounding in the batched matmuls;
  - apart (the benchmark): each lane its own cache and forward pass, so each step's wall time is its own.
Stepping in turn lets a page show every lane as it grows, and a stop after any step keeps what every lane has.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import time

import torch

from ..config import DecodeConfig
from ..errors import ConfigError
from engine.decoding.kv import cache_size
from ..model import LoadedModel
from engine.decoding.runner import Forward, forward_kwargs
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

    def __init__(self, lm: LoadedModel, prompt: str, configs: list[DecodeConfig], batched: bool = True):
        if not configs:
            raise ConfigError("lanes", "lanes: give at least one decode setting")
        for config in configs:
            if config.strategy in ("beam", "speculative"):
                raise ConfigError("strategy", f"strategy: {config.strategy} is not a single-sequence lane")
            if config.chat != configs[0].chat:
                raise ConfigError("chat", "chat: every lane must read the same prompt (chat on or off for all)")
        self.lm, self.batched = lm, batched
        self.runners = [make_runner(lm, prompt, config) for config in configs]
        self._past = None
        self._fwd = forward_kwargs(lm.model)
        if any(c.strategy == "hidden-state" for c in configs):
            self._fwd["output_hidden_states"] = True

    @property
    def finished(self) -> bool:
        return all(r.finished for r in self.runners)

    @torch.inference_mode()
    def step(self, on_step: OnStep | None = None) -> bool:
        """One step of every running lane; False once all have ended, or when `on_step` asked to stop."""
        if self.finished:
            return False
        if self.batched:
            return self._batched_step(on_step)
        for i, runner in enumerate(self.runners):
            if runner.finished:
                continue
            step = runner.step()
            if on_step is not None and on_step(i, step) is False:
                return False
        return not self.finished

    def _batched_step(self, on_step: OnStep | None) -> bool:
        t0 = time.perf_counter()
        n, lm = len(self.runners), self.lm
        if self._past is None:
            ids = torch.tensor([self.runners[0].prompt_ids], device=lm.device)             # [1, P]
            out = lm.model(input_ids=ids, use_cache=True, **self._fwd)
            prefill_s = time.perf_counter() - t0
            out.past_key_values.batch_repeat_interleave(n)
            self._past, appended = out.past_key_values, ids.shape[1]
            expand = n                                                                   # every lane sees the same
        else:
            embeds = torch.cat([self._input_row(r) for r in self.runners])                 # [n, 1, hidden]
            out = lm.model(inputs_embeds=embeds, past_key_values=self._past, use_cache=True, **self._fwd)
            self._past, appended, prefill_s, expand = out.past_key_values, 1, None, 0
        _, rows, total = cache_size(self._past)
        logits = out.logits[:, -1].to("cpu", torch.float32)
        states = getattr(out, "hidden_states", None)
        hidden = None if states is None else states[-1][:, -1]
        if expand:
            logits = logits.expand(n, -1)
            hidden = None if hidden is None else hidden.expand(n, -1)
        seconds = time.perf_counter() - t0
        go_on = True
        for i, runner in enumerate(self.runners):
            if runner.finished:
                continue
            fwd = Forward(logits=logits[i:i + 1], appended=appended, cache_rows=rows, cache_bytes=total // n,
                          hidden=None if hidden is None else hidden[i:i + 1])
            step = runner.keep(runner.choose_after(fwd), seconds, prefill_s=prefill_s)
            if on_step is not None and on_step(i, step) is False:
                go_on = False
        return go_on and not self.finished

    def _input_row(self, runner) -> torch.Tensor:
        """[1, 1, hidden]: what this lane feeds next, as the model receives it."""
        kind, value = runner.next_input
        if kind == "hidden":
            return value.to(self.lm.model.get_input_embeddings().weight.dtype)
        return self.lm.model_inputs(kind, value)

    def run(self, on_step: OnStep | None = None) -> list[LaneRun]:
        while self.step(on_step):
            pass
        return self.results()

    def results(self) -> list[LaneRun]:
        """Every lane's steps so far."""
        return [LaneRun(r.trace(), lane_vectors(self.lm, r)) for r in self.runners]
