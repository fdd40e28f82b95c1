"""The shared skeleton of every decode: prefill, one forward pass per step, records, run, trace.

A runner holds one decode in progress: the prompt's ids, the KV cache, and the steps
recorded so far. Subclasses say only what differs, how one step chooses:
  - `Decoder` (decoder.py): one sequence; greedy, sample, soft, gumbel;
  - `BeamSearch` (beam.py): B running beams, the tree of every expansion.
`strategies.make_runner` picks the subclass for a config. The UI drives a runner one
`step()` at a time (the Next button); `run()` steps to the end.
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
import time

import torch
import transformers

from engine.config import DecodeConfig
from engine.grammar.constrain import GrammarMask
from engine.decoding.kv import cache_size
from engine.model import LoadedModel
from engine.decoding.prefill import read_in_parts
from engine.samplers.chain import prepare
from engine.samplers.order import HISTORY_STAGES
from engine.samplers.shaping import build_processors
from engine.samplers.stages import stage_name
from engine.tokens import encode_prompt
from engine.trace import Node, Sequence, Step, Trace


def versions() -> dict:
    """The library versions a trace was made with (shown beside it, checked by nobody)."""
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": sys.version.split()[0], "decodescope": "0.1"}


def forward_kwargs(model) -> dict:
    """Ask for logits at the last position only, where the model supports it."""
    params = inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if "logits_to_keep" in params else {}


def facts_dict(lm: LoadedModel) -> dict:
    """The model facts a trace carries, so it can be read without the model."""
    facts = dataclasses.asdict(lm.facts)
    facts["kv_bytes_per_token"] = lm.facts.kv_bytes_per_token
    return facts


@dataclasses.dataclass(frozen=True)
class Forward:
    """What one forward pass gave: logits at the last position, and the cache it left."""
    logits: torch.Tensor     # [rows, vocab] float32
    appended: int            # KV rows this pass wrote (prompt x rows at prefill, else rows)
    cache_rows: int          # tokens each cache row holds now
    cache_bytes: int         # bytes of the whole cache, read off its tensors
    hidden: torch.Tensor | None = None   # [rows, hidden] the last position's final hidden state, when asked for


class Runner:
    """One decode of `prompt` under `config`, advanced one step at a time.

    The pipeline of a step:
      1. `forward`: the prompt at the first step (prefill), then only the new position,
         reusing the KV cache (`logits_to_keep=1`);
      2. the subclass shapes the logits with transformers' processors and chooses;
      3. the step is recorded as plain values (`Step`), with its wall time;
      4. `finished` turns true at end-of-text or at `max_new_tokens`.
    """

    def __init__(self, lm: LoadedModel, prompt: str, config: DecodeConfig):
        config.validate(lm.facts.vocab_size)
        self.lm, self.prompt, self.config = lm, prompt, config
        self.prompt_ids = encode_prompt(lm, prompt, config.chat, config.max_new_tokens)
        self.processors = build_processors(config)
        prepare(self.processors, prompt_length=len(self.prompt_ids), token_texts=lm.token_texts,
                tokenize=lm.tokenize)
        self.grammar: GrammarMask | None = None
        if config.grammar_kind:          # after the stages that read the history, before the warpers, as generate
            self.grammar = GrammarMask(lm, config.grammar_kind, config.grammar, len(self.prompt_ids))
            history = [stage_name(p)[0] in HISTORY_STAGES for p in self.processors] + [False]
            self.processors.insert(history.index(False), self.grammar)
        self.steps: list[Step] = []
        self.finished = False
        self._past = None                 # the transformers cache after the last forward pass
        self._start = None                # a prompt's pass run elsewhere, taken as the prefill (start_from)
        self._fwd = forward_kwargs(lm.model)
        self._t0 = time.perf_counter()
        self._prefill_s = 0.0

    # ---- one step ------------------------------------------------------------
    @torch.inference_mode()
    def step(self) -> Step | None:
        """Run one forward pass and one choice; None once the decode has ended."""
        if self.finished:
            return None
        t0 = time.perf_counter()
        return self.keep(self._advance(), time.perf_counter() - t0)

    def keep(self, step: Step, seconds: float, prefill_s: float | None = None) -> Step:
        """Add a recorded step, with the wall time it took. prefill_s: the prompt's forward pass, when it ran
        outside this runner (a lane batch runs one prefill for all its lanes)."""
        if prefill_s is not None:
            self._prefill_s = prefill_s
        step = dataclasses.replace(step, seconds=seconds)
        self.steps.append(step)
        return step

    def _advance(self) -> Step:
        """One step of this strategy: forward, shape, choose, and set `finished`."""
        raise NotImplementedError

    def start_from(self, prompt) -> "Runner":
        """Take the prompt's forward pass from `prompt` (engine.answers.passes.PromptCache, of these prompt ids)
        instead of running it again: its logits, and its keys and values shared by every row (a beam search's
        B rows hold one copy of the prompt). The steps are the ones a prefill of their own gives."""
        if list(prompt.prompt_ids) != list(self.prompt_ids) or self._past is not None:
            raise ValueError("start_from: a pass over other prompt ids, or a decode already under way")
        self._start = prompt
        return self

    def forward(self, **inputs) -> Forward:
        """inputs: `input_ids` [rows, n] or `inputs_embeds` [rows, n, hidden]; n = prompt length at prefill."""
        t0 = time.perf_counter()
        prefill = self._past is None
        if prefill and self._start is not None:
            rows, length = next(iter(inputs.values())).shape[:2]
            self._past = self._start.rows_cache(rows)
            _, cached, nbytes = cache_size(self._past)
            return Forward(logits=self._start.logits.expand(rows, -1).clone(), appended=rows * length,
                           cache_rows=cached, cache_bytes=nbytes)
        device = self.lm.device
        inputs = {k: v.to(device) for k, v in inputs.items()}       # records stay on the CPU; the model may not
        if prefill and "input_ids" in inputs:          # a long prompt in parts (decoding/prefill.py): faster on a CPU
            out = read_in_parts(self.lm.model, inputs["input_ids"], self._fwd)
        else:
            out = self.lm.model(**inputs, past_key_values=self._past, use_cache=True, **self._fwd)
        if prefill:
            self._prefill_s = time.perf_counter() - t0
        self._past = out.past_key_values
        new = next(iter(inputs.values()))
        _, rows, nbytes = cache_size(self._past)
        states = getattr(out, "hidden_states", None)          # present when self._fwd asks for them
        return Forward(logits=out.logits[:, -1].to("cpu", torch.float32), appended=new.shape[0] * new.shape[1],
                       cache_rows=rows, cache_bytes=nbytes, hidden=None if states is None else states[-1][:, -1])

    @property
    def cache_bytes(self) -> int:
        """Bytes the KV cache holds now, read off its tensors (0 before the first forward pass)."""
        return cache_size(self._past)[2]

    # ---- whole run -----------------------------------------------------------
    def run(self) -> Trace:
        while not self.finished:
            self.step()
        return self.trace()

    def trace(self) -> Trace:
        """The trace of the steps so far (a finished decode, or a partial one)."""
        decode_s = sum(s.seconds for s in self.steps)
        timings = {"prefill_s": self._prefill_s, "decode_s": decode_s, "total_s": time.perf_counter() - self._t0,
                   "tokens_per_s": len(self.steps) / decode_s if decode_s else 0.0}
        timings.update(self._timings(decode_s))
        return Trace(model=self.lm.name, prompt=self.prompt, prompt_token_ids=list(self.prompt_ids),
                     config=self.config, steps=list(self.steps), sequences=self._sequences(),
                     nodes=self._nodes(), model_facts=facts_dict(self.lm), versions=versions(),
                     timings=timings, forced=self._forced())

    def _sequences(self) -> list[Sequence]:
        raise NotImplementedError

    def _nodes(self) -> list[Node]:
        return []

    def _forced(self) -> dict:
        return {}

    def _timings(self, decode_s: float) -> dict:
        return {}
