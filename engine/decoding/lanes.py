"""Several single-sequence decodes of one prompt in one batch: the prompt's prefill runs once.

This is the shared-prefix point made concrete. Each lane (greedy, a sampling variant, soft,
gumbel) is a `Decoder` with its own processors and its own seeded generator; only the forward
pass is shared:
  1. prefill the prompt once, as a batch of one;
  2. give every lane a row over that one copy of the prompt's keys and values (engine.decoding.shared_prefix: nothing
     copied per lane; a cache that cannot be shared is copied per lane with `batch_repeat_interleave`);
  3. each step, every lane's next input becomes one row of `inputs_embeds` through
     `LoadedModel.model_inputs`: a token id through the model's own embedding layer, a soft or
     Gumbel vector with the same scaling that layer applies (Gemma's sqrt(hidden)), exactly as alone;
  4. each lane shapes, chooses and records from its own row of logits.
A lane that has ended keeps its row (its outputs are ignored) until every lane has ended.
Each lane's trace equals that lane decoded alone, up to float rounding in the batched matmuls.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from engine.config import DecodeConfig
from engine.decoding.decoder import Decoder
from engine.errors import ConfigError
from engine.decoding.kv import cache_size
from engine.model import LoadedModel
from engine.decoding.prefill import read_in_parts
from engine.decoding.runner import Forward, forward_kwargs
from engine.decoding.shared_prefix import shareable, shared_rows
from engine.trace import Step, Trace

OnStep = Callable[[int, Step], bool | None]   # (lane index, its new step) -> False to stop


class LaneBatch:
    """Lanes of one prompt, decoded together; `run()` returns one Trace per lane, in order."""

    def __init__(self, lm: LoadedModel, prompt: str, configs: list[DecodeConfig]):
        if not configs:
            raise ConfigError("lanes", "lanes: give at least one decode setting")
        for config in configs:
            if config.strategy == "beam":
                raise ConfigError("strategy", "strategy: beam search runs its own batch of beams, not as a lane")
            if config.chat != configs[0].chat:
                raise ConfigError("chat", "chat: every lane must read the same prompt (chat on or off for all)")
        self.lm, self.prompt = lm, prompt
        self.lanes = [Decoder(lm, prompt, config) for config in configs]
        self._past = None
        self._fwd = forward_kwargs(lm.model)

    @property
    def finished(self) -> bool:
        return all(lane.finished for lane in self.lanes)

    @torch.inference_mode()
    def step(self, on_step: OnStep | None = None) -> bool:
        """One batched forward pass and one choice per running lane. False once every lane has ended,
        or when `on_step` asked to stop."""
        if self.finished:
            return False
        t0 = time.perf_counter()
        n = len(self.lanes)
        if self._past is None:
            ids = torch.tensor([self.lanes[0].prompt_ids], device=self.lm.device)         # [1, P]
            out = read_in_parts(self.lm.model, ids, self._fwd)                          # a long prompt in parts
            prefill_s = time.perf_counter() - t0
            _, rows, nbytes = cache_size(out.past_key_values)
            logits = out.logits[:, -1].to("cpu", torch.float32).expand(n, -1)         # every lane sees the same
            if shareable(out.past_key_values):
                self._past = shared_rows(out.past_key_values, n)
            else:
                out.past_key_values.batch_repeat_interleave(n)
                self._past = out.past_key_values
            appended = ids.shape[1]
        else:
            embeds = torch.cat([self._input_row(lane) for lane in self.lanes])         # [n, 1, hidden]
            out = self.lm.model(inputs_embeds=embeds, past_key_values=self._past, use_cache=True, **self._fwd)
            self._past = out.past_key_values
            _, rows, total = cache_size(self._past)
            nbytes = total // n                                                        # each lane's share
            logits = out.logits[:, -1].to("cpu", torch.float32)
            appended = 1
            prefill_s = None
        seconds = time.perf_counter() - t0
        go_on = True
        for i, lane in enumerate(self.lanes):
            if lane.finished:
                continue
            fwd = Forward(logits=logits[i:i + 1], appended=appended, cache_rows=rows, cache_bytes=nbytes)
            step = lane.keep(lane.choose_after(fwd), seconds, prefill_s=prefill_s)
            if on_step is not None and on_step(i, step) is False:
                go_on = False
        return go_on and not self.finished

    def _input_row(self, lane: Decoder) -> torch.Tensor:
        """[1, 1, hidden]: what this lane feeds next, as an embedding."""
        return self.lm.model_inputs(*lane.next_input)

    def run(self, on_step: OnStep | None = None) -> list[Trace]:
        while self.step(on_step):
            pass
        return self.traces()

    def traces(self) -> list[Trace]:
        """One trace per lane, of the steps so far."""
        return [lane.trace() for lane in self.lanes]


def decode_lanes(lm: LoadedModel, prompt: str, configs: list[DecodeConfig],
                 on_step: OnStep | None = None) -> list[Trace]:
    """Decode `prompt` under each config in one batch; one Trace per config, in order."""
    return LaneBatch(lm, prompt, configs).run(on_step)
