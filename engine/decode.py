"""The step loop for greedy, sample, soft and gumbel decoding, recording every step.

One step is one forward pass over one new position, reusing the KV cache:
  1. the model gives logits for the last position only (`logits_to_keep=1`);
  2. transformers' processors shape them (penalty, temperature, top-k, top-p, min-p);
  3. a separate choice picks the token: argmax (greedy), a seeded draw (sample),
     or no single token at all (soft feeds back e = p^T E, gumbel a relaxed sample);
  4. the step is recorded as plain values, and the choice becomes the next input.
`Decoder` can be driven one step at a time (the UI's Next button); `decode` runs it
to the end. Beam search lives in beam.py and shares the recording helpers.
"""
from __future__ import annotations

import inspect
import time

import torch
import transformers

from .config import DecodeConfig
from .errors import ConfigError
from .kv import cache_size
from .record import candidates_record, feedback_record, kv_record
from .shaping import build_processors
from .stages import staged_scores, stages_record
from .tokens import encode_prompt
from .trace import Sequence, Step, Trace


def versions() -> dict:
    import sys

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": sys.version.split()[0], "decodescope": "0.1"}


def forward_kwargs(model) -> dict:
    """Ask for logits at the last position only, where the model supports it."""
    params = inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if "logits_to_keep" in params else {}


class Decoder:
    """A decode in progress for one prompt: holds the KV cache and the steps so far.

    `forced` maps a step index to a token id that replaces the strategy's choice
    there (a branch). The random draw still happens at a forced step, so the
    generator stays in step with the unforced run.
    """

    def __init__(self, lm, prompt: str, config: DecodeConfig, forced: dict | None = None):
        if config.strategy == "beam":
            raise ConfigError("strategy", "strategy: use engine.beam.BeamSearch for beam search")
        config.validate(lm.facts.vocab_size)
        self.lm, self.prompt, self.config = lm, prompt, config
        self.forced = {int(k): int(v) for k, v in (forced or {}).items()}
        for step, token in self.forced.items():
            if not 0 <= token < lm.facts.vocab_size:
                raise ConfigError("forced", f"forced: token id {token} at step {step} is outside the vocabulary")
        self.prompt_ids = encode_prompt(lm, prompt, config.chat, config.max_new_tokens)
        self.processors = build_processors(config)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.steps: list = []
        self.generated: list = []
        self.logprobs: list = []
        self.finished = False
        self._past = None
        self._next_input = None   # ("ids", tensor) or ("embeds", tensor)
        self._fwd = forward_kwargs(lm.model)
        self._t0 = time.perf_counter()
        self._prefill_s = 0.0

    # ---- one step ----------------------------------------------------------
    @torch.inference_mode()
    def step(self) -> Step | None:
        """Run one forward pass and one choice; None once the decode has ended."""
        if self.finished:
            return None
        t0 = time.perf_counter()
        lm, config = self.lm, self.config
        context = torch.tensor([self.prompt_ids + self.generated])
        if self._past is None:
            out = lm.model(input_ids=context, use_cache=True, **self._fwd)
            self._prefill_s = time.perf_counter() - t0
            appended = len(self.prompt_ids)
        else:
            kind, value = self._next_input
            inputs = {"input_ids": value} if kind == "ids" else {"inputs_embeds": value}
            out = lm.model(**inputs, past_key_values=self._past, use_cache=True, **self._fwd)
            appended = 1
        self._past = out.past_key_values
        index = len(self.steps)
        _, rows, nbytes = cache_size(self._past)

        logits = out.logits[0, -1].to(torch.float32)
        staged = staged_scores(self.processors, context, logits[None])   # each processor in turn
        shaped = staged[-1][0] if staged else logits.clone()
        token, feedback, next_input = self._choose(shaped)
        if index in self.forced:
            token = self.forced[index]
            if config.strategy in ("soft", "gumbel"):
                next_input = ("embeds", lm.embeddings[token].to(torch.float32)[None, None])
            feedback = feedback if config.strategy not in ("soft", "gumbel") else None
        if next_input is None:
            next_input = ("ids", torch.tensor([[token]]))
        self._next_input = next_input

        dist = candidates_record(lm, logits, shaped, config.top_n, must_include=(token,))
        stages = stages_record(lm.token_texts, self.processors, logits, staged,
                               [c.token_id for c in dist["candidates"]])
        kv = kv_record(lm.facts.kv_bytes_per_token, rows, nbytes, 1, appended, 0, [context[0].tolist()])
        self.generated.append(token)
        self.logprobs.append(float(torch.log_softmax(logits, -1)[token]))
        step = Step(index=index, chosen_ids=[token], chosen_texts=[lm.token_texts[token]], feedback=feedback,
                    kv=kv, seconds=time.perf_counter() - t0, stages=stages, **dist)
        self.steps.append(step)
        if token in lm.eos_token_ids or len(self.generated) >= config.max_new_tokens:
            self.finished = True
        return step

    def _choose(self, shaped: torch.Tensor):
        """(token id, FeedBack or None, next input or None) for the configured strategy."""
        lm, config = self.lm, self.config
        if config.strategy == "greedy":
            return int(shaped.argmax()), None, None
        probs = torch.softmax(shaped, dim=-1)
        if config.strategy == "sample":
            return int(torch.multinomial(probs, 1, generator=self.generator)), None, None
        E = lm.embeddings.to(torch.float32)
        if config.strategy == "soft":
            weights = probs
        else:  # gumbel: y = softmax((log p + g) / tau), g ~ Gumbel(0, 1) from the seeded generator
            u = torch.rand(probs.shape, generator=self.generator).clamp(1e-10, 1 - 1e-10)
            gumbel = -torch.log(-torch.log(u))
            weights = torch.softmax((torch.log_softmax(shaped, -1) + gumbel) / config.tau, dim=-1)
            if config.hard:   # straight-through: the forward value is the one-hot of the argmax
                weights = torch.nn.functional.one_hot(weights.argmax(), weights.shape[-1]).to(torch.float32)
        vector = weights @ E
        feedback = feedback_record(lm, weights, vector)
        return int(weights.argmax()), feedback, ("embeds", vector[None, None])

    # ---- whole run -----------------------------------------------------------
    def run(self) -> "Trace":
        while not self.finished:
            self.step()
        return self.trace()

    def trace(self) -> Trace:
        """The trace of the steps so far (a finished decode, or a partial one)."""
        lm, config = self.lm, self.config
        ids = list(self.generated)
        cum = sum(self.logprobs)
        length = max(len(ids), 1)
        seq = Sequence(token_ids=ids, text=lm.tokenizer.decode(ids, skip_special_tokens=True),
                       cum_logprob=cum, score=cum / length ** config.length_penalty)
        total = time.perf_counter() - self._t0
        decode_s = sum(s.seconds for s in self.steps)
        return Trace(model=lm.name, prompt=self.prompt, prompt_token_ids=list(self.prompt_ids), config=config,
                     steps=list(self.steps), sequences=[seq], model_facts=facts_dict(lm), versions=versions(),
                     timings={"prefill_s": self._prefill_s, "decode_s": decode_s, "total_s": total,
                              "tokens_per_s": len(ids) / decode_s if decode_s else 0.0},
                     forced=dict(self.forced))


def facts_dict(lm) -> dict:
    import dataclasses

    facts = dataclasses.asdict(lm.facts)
    facts["kv_bytes_per_token"] = lm.facts.kv_bytes_per_token
    return facts


def decode(lm, prompt: str, config: DecodeConfig, forced: dict | None = None) -> Trace:
    """Decode `prompt` with `config` and return the full Trace."""
    if config.strategy == "beam":
        from .beam import BeamSearch

        if forced:
            raise ConfigError("forced", "forced: beam search cannot force a token; use greedy or sample to branch")
        return BeamSearch(lm, prompt, config).run()
    return Decoder(lm, prompt, config, forced=forced).run()
