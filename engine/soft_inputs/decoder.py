"""`SoftInputDecoder`: one sequence whose next input is what a feed-back rule forms, not only a token id.

Each step is engine.decoding.decoder's step (forward, the chain of processors, the records) with the choice made by the
configured rule (rules.py):
  - soft-thinking: the chain's p, top `soft_top_k` renormalised, sum w_i E[i] fed, the argmax emitted; after Cold
    Stop fires, the step feeds its emitted id and every later step samples an id from the chain's p;
  - mixture-of-inputs: y sampled from the chain's p exactly as plain sampling draws it; the blend fed;
  - hidden-state: the argmax emitted, the last position's final hidden state fed as the next input embedding,
    with no projection and no scaling (Coconut's input, without the training that makes a model read it);
  - multi-token-mean: the mean embedding of K ids drawn from the chain's p, the first draw emitted.
The step records the fed ids and weights (the 20 heaviest), the emitted id and the measures (measures.py).
"""
from __future__ import annotations

import dataclasses
import time

import torch

from ..config import SOFT_INPUT_STRATEGIES, DecodeConfig, cold_stop_spec
from engine.decoding.decoder import Decoder
from ..errors import ConfigError
from ..model import LoadedModel
from engine.decoding.runner import Forward
from ..trace import Step
from .measures import fed_measures
from .rules import (ColdStop, Fed, cold_entropy, mixture_vector, moi_weights, multi_token_mean, one_id,
                    soft_thinking)

MAX_FED = 20     # fed tokens a step records (the trace reader allows no more)


class SoftInputDecoder(Decoder):
    """A decode whose choice is one of SOFT_INPUT_STRATEGIES; everything else is Decoder's."""

    def __init__(self, lm: LoadedModel, prompt: str, config: DecodeConfig, forced: dict | None = None):
        if config.strategy not in SOFT_INPUT_STRATEGIES:
            raise ConfigError("strategy", f"strategy: a feed-back rule is one of {', '.join(SOFT_INPUT_STRATEGIES)}, "
                                          f"got '{str(config.strategy)[:40]}'")
        super().__init__(lm, prompt, config, forced=forced)
        spec = cold_stop_spec(config.cold_stop) if config.strategy == "soft-thinking" else None
        self.cold = ColdStop(*spec) if spec else None
        if config.strategy == "hidden-state":
            self._fwd = {**self._fwd, "output_hidden_states": True}
        self._logits: torch.Tensor | None = None     # this step's raw logits [V]
        self._hidden: torch.Tensor | None = None     # this step's last final hidden state [hidden]
        self._fed: Fed | None = None
        self._entropy = 0.0
        self._fired = False
        self._rule_s = 0.0
        self.fed_vectors: list = []                  # per step, the vector fed next as the model receives it

    # ---- one step ------------------------------------------------------------------------
    def _advance(self) -> Step:
        if self._next_input is not None and self._next_input[0] == "hidden":
            layer = self.lm.model.get_input_embeddings()
            return self.choose_after(self.forward(inputs_embeds=self._next_input[1].to(layer.weight.dtype)))
        return super()._advance()

    def choose_after(self, fwd: Forward) -> Step:
        self._logits = fwd.logits[0]
        self._hidden = None if fwd.hidden is None else fwd.hidden[0]
        step = super().choose_after(fwd)
        fed = one_id(step.chosen_ids[0]) if step.index in self.forced else self._fed
        vector = self._input_vector(fed)
        self.fed_vectors.append(vector)
        measures = fed_measures(self.lm, fed, vector, entropy=self._entropy, low_steps=self.cold.low if self.cold
                                else 0, cold_stop=self._fired, rule_seconds=self._rule_s)
        return dataclasses.replace(step, fed_ids=[int(i) for i in fed.ids[:MAX_FED]],
                                   fed_weights=[float(w) for w in fed.weights[:MAX_FED]], emitted_id=fed.emitted,
                                   fed=measures)

    def _input_vector(self, fed: Fed) -> torch.Tensor:
        """[hidden] the fed vector as the model receives it (after the embedding scale), on the CPU in float32."""
        kind, value = self._next_input
        if kind == "hidden":
            return value[0, 0].to("cpu", torch.float32)
        row = value[0, 0] if kind == "embeds" else self.lm.embeddings[fed.emitted]
        scale = self.lm.embed_scale
        return row.float() * (1.0 if scale is None else float(scale))

    def _choose(self, shaped: torch.Tensor):
        """shaped: [V] after the chain. (emitted id, None, next input); the rule's Fed is kept for the records."""
        config = self.config
        t0 = time.perf_counter()
        temperature = config.temperature if config.warped else 1.0
        self._entropy = cold_entropy(self._logits, temperature)
        self._fired = self.cold.update(self._entropy) if self.cold is not None else False
        probs = torch.softmax(shaped, dim=-1)
        strategy = config.strategy
        if strategy == "soft-thinking":
            if self.cold is not None and self.cold.stopped and not self._fired:      # after Cold Stop: ids
                fed = one_id(int(torch.multinomial(probs, 1, generator=self.generator)))
            else:
                fed = soft_thinking(probs, config.soft_top_k, self.generator, config.soft_gumbel,
                                    config.soft_dirichlet)
                if self._fired:                          # the step Cold Stop fires at feeds its emitted id
                    fed = one_id(fed.emitted)
        elif strategy == "mixture-of-inputs":
            sampled = int(torch.multinomial(probs, 1, generator=self.generator))   # as plain sampling draws it
            fed = moi_weights(self._logits, sampled, config.moi_beta)
        elif strategy == "multi-token-mean":
            fed = multi_token_mean(probs, config.mtm_k, self.generator)
        else:                                            # hidden-state
            token = int(shaped.argmax())
            fed = Fed(torch.zeros(0, dtype=torch.long), torch.zeros(0), token, "hidden")
        if fed.kind == "hidden":
            next_input = ("hidden", self._hidden[None, None])
        elif fed.kind == "id":
            next_input = ("ids", torch.tensor([[fed.emitted]]))
        else:
            next_input = ("embeds", mixture_vector(self.lm.embeddings, fed)[None, None])
        self._rule_s = time.perf_counter() - t0
        self._fed = fed
        return fed.emitted, None, next_input

    # ---- branches: replayed, since Cold Stop's count and the fed vectors are this run's own ----------------
    def fork(self, at: int, token: int) -> "SoftInputDecoder":
        """A new decode that forces `token` at step `at`, replayed from the start (same steps before `at`)."""
        forced = {k: v for k, v in self.forced.items() if k < at}
        forced[at] = int(token)
        return SoftInputDecoder(self.lm, self.prompt, self.config, forced=forced)

    def copy(self) -> None:
        """None: the caller decodes afresh (Decoder.copy's answer where a cache cannot be copied)."""
        return None
