"""One sequence, one token per step: greedy, sample, soft and gumbel decoding.

Each step (see `Runner` for the forward pass and the records):
  1. the model gives logits for the last position;
  2. transformers' processors shape them (penalty, temperature, top-k, top-p, min-p),
     one at a time, and what each stage did is recorded (stages.py);
  3. a separate choice picks the token: argmax (greedy), a seeded draw (sample),
     or no single token at all (soft feeds back e = p^T E, gumbel a relaxed sample);
  4. the choice, an id or a vector, becomes the next input.
"""
from __future__ import annotations

import copy

import torch

from engine.decoding.beam import beam_score
from engine.config import FEEDBACK_STRATEGIES, SOFT_INPUT_STRATEGIES, DecodeConfig
from engine.errors import ConfigError
from engine.grammar.constrain import grammar_record
from engine.model import LoadedModel
from engine.decoding.record import candidates_record, feedback_record, kv_record
from engine.decoding.runner import Forward, Runner
from engine.samplers.chain import accept, carry
from engine.samplers.stages import staged_scores, stages_record
from engine.tokens import encode_prompt
from engine.trace import FeedBack, Sequence, Step


class Decoder(Runner):
    """A single-sequence decode in progress.

    `forced` maps a step index to a token id that replaces the strategy's choice
    there (a branch). The random draw still happens at a forced step, so the
    generator stays in step with the unforced run.
    """

    def __init__(self, lm: LoadedModel, prompt: str, config: DecodeConfig, forced: dict | None = None):
        if config.strategy == "beam":
            raise ConfigError("strategy", "strategy: use engine.decoding.beam.BeamSearch for beam search")
        if config.strategy in SOFT_INPUT_STRATEGIES and type(self) is Decoder:
            raise ConfigError("strategy", f"strategy: {config.strategy} runs in engine.soft_inputs' SoftInputDecoder "
                                          "(engine.strategies.make_runner picks it)")
        super().__init__(lm, prompt, config)
        self.forced = {int(k): int(v) for k, v in (forced or {}).items()}
        if self.forced and config.grammar_kind:
            raise ConfigError("forced", "forced: a constrained decode takes only tokens its grammar allows; "
                                        "branch without a grammar")
        for step, token in self.forced.items():
            if not 0 <= token < lm.facts.vocab_size:
                raise ConfigError("forced", f"forced: token id {token} at step {step} is outside the vocabulary")
        self.generator = torch.Generator().manual_seed(config.seed)
        self.generated: list[int] = []
        self.logprobs: list[float] = []
        self._next_input: tuple | None = None   # ("ids", [1, 1]) or ("embeds", [1, 1, hidden])
        self._inputs: list = []                 # per step: the input it fed (None at the prefill)
        self._rng_states: list = []             # per step: the generator's state before its draw

    @property
    def next_input(self) -> tuple | None:
        """What the next step feeds the model: ("ids", [1, 1] tensor) or ("embeds", [1, 1, hidden])."""
        return self._next_input

    @property
    def context(self) -> torch.Tensor:
        """[1, P + t] the prompt and the tokens chosen so far (the processors read it)."""
        return torch.tensor([self.prompt_ids + self.generated])

    def _advance(self) -> Step:
        if self._next_input is None:
            fwd = self.forward(input_ids=self.context)
        else:
            kind, value = self._next_input
            if kind == "ids":
                fwd = self.forward(input_ids=value)
            else:   # a vector in the space of E's rows; the model gets it as its embedding layer would give it
                fwd = self.forward(inputs_embeds=self.lm.model_inputs(kind, value))
        return self.choose_after(fwd)

    def choose_after(self, fwd: Forward) -> Step:
        """Shape, choose and record, given this step's forward pass (run here, or batched with other lanes)."""
        lm, config = self.lm, self.config
        index = len(self.steps)
        self._inputs.append(self._next_input)            # kept so a branch can start here (see fork)
        self._rng_states.append(self.generator.get_state())
        context = self.context
        logits = fwd.logits[0]                                                    # [V]
        staged = staged_scores(self.processors, context, logits[None])   # each processor in turn
        shaped = staged[-1][0] if staged else logits.clone()
        token, feedback, next_input = self._choose(shaped)
        if index in self.forced:            # a branch: the forced id replaces the choice, and is fed as an id
            token, feedback = self.forced[index], None
            if config.strategy in FEEDBACK_STRATEGIES:
                next_input = ("embeds", lm.embeddings[token].to(torch.float32)[None, None])
        self._next_input = next_input or ("ids", torch.tensor([[token]]))

        dist = candidates_record(lm, logits, shaped, config.top_n, must_include=(token,))
        stages = stages_record(lm.token_texts, self.processors, logits, staged,
                               [c.token_id for c in dist.candidates], chosen=token)
        accept(self.processors, context, token)          # a stage that carries state (mirostat's μ) learns
        kv = kv_record(lm.facts.kv_bytes_per_token, rows_per_beam=fwd.cache_rows, cache_bytes=fwd.cache_bytes,
                       beams=1, appended=fwd.appended, copied=0, cached_sequences=[context[0].tolist()])
        grammar = None
        if self.grammar is not None:
            accepting = self.grammar.accepting(tuple(self.generated + [token]))
            grammar = grammar_record(lm.token_texts, self.grammar.last_scores[0], self.grammar.last_allowed[0],
                                     accepting)
        self.generated.append(token)
        self.logprobs.append(float(torch.log_softmax(logits, -1)[token]))
        if token in lm.eos_token_ids or len(self.generated) >= config.max_new_tokens:
            self.finished = True
        return Step(index=index, chosen_ids=[token], chosen_texts=[lm.token_texts[token]], feedback=feedback,
                    kv=kv, stages=stages, candidates=dist.candidates, entropy=dist.entropy, varentropy=dist.varentropy,
                    shaped_entropy=dist.shaped_entropy, removed_mass=dist.removed_mass, kept_count=dist.kept_count,
                    grammar=grammar)

    def _choose(self, shaped: torch.Tensor) -> tuple[int, FeedBack | None, tuple | None]:
        """shaped: [V]. (token id, FeedBack or None, next input or None) for the configured strategy."""
        lm, config = self.lm, self.config
        if config.strategy == "greedy":
            return int(shaped.argmax()), None, None
        probs = torch.softmax(shaped, dim=-1)
        if config.strategy == "sample":
            return int(torch.multinomial(probs, 1, generator=self.generator)), None, None
        E = lm.embeddings.to(torch.float32)                                       # [V, hidden]
        if config.strategy == "soft":
            weights = probs
        else:  # gumbel: y = softmax((log p + g) / tau), g ~ Gumbel(0, 1) from the seeded generator
            u = torch.rand(probs.shape, generator=self.generator).clamp(1e-10, 1 - 1e-10)
            gumbel = -torch.log(-torch.log(u))
            weights = torch.softmax((torch.log_softmax(shaped, -1) + gumbel) / config.tau, dim=-1)
            if config.hard:   # straight-through: the forward value is the one-hot of the argmax
                weights = torch.nn.functional.one_hot(weights.argmax(), weights.shape[-1]).to(torch.float32)
        vector = weights @ E                                                      # [hidden]
        feedback = feedback_record(lm, weights, vector)
        return int(weights.argmax()), feedback, ("embeds", vector[None, None])

    def retarget(self, config: DecodeConfig) -> bool:
        """Take new settings without replaying, when they cannot change the steps already taken (a
        new length, or settings this strategy ignores). False when the steps must be replayed."""
        if (config.strategy == "beam" or config.steps_key() != self.config.steps_key()
                or config.max_new_tokens < len(self.steps)):
            return False
        config.validate(self.lm.facts.vocab_size)
        encode_prompt(self.lm, self.prompt, config.chat, config.max_new_tokens)   # the context still fits
        self.config = config
        ended = bool(self.generated) and self.generated[-1] in self.lm.eos_token_ids
        self.finished = ended or len(self.generated) >= config.max_new_tokens
        return True

    # ---- branches ------------------------------------------------------------------
    def fork(self, at: int, token: int) -> "Decoder":
        """A new decode that forces `token` at step `at` and shares everything before it.

        Steps 0..at-1 are copied, and so are the KV cache rows they wrote and the generator's
        state, so the branch starts with the one forward pass of step `at` instead of replaying
        the prefix. Where the cache cannot be cut (sliding-window or other special caches), the
        branch replays from the start instead; both give the same steps."""
        forced = {k: v for k, v in self.forced.items() if k < at}
        forced[at] = int(token)
        child = Decoder(self.lm, self.prompt, self.config, forced=forced)
        carry(self.processors, child.processors)     # what its stages learnt before `at` (mirostat's μ)
        if not 0 < at < len(self.steps):
            return child
        past = prefix_cache(self._past, len(self.prompt_ids) + at - 1)
        if past is None:
            return child
        child._past, child._prefill_s = past, self._prefill_s
        child.steps, child.generated, child.logprobs = self.steps[:at], self.generated[:at], self.logprobs[:at]
        child._inputs, child._rng_states = self._inputs[:at], self._rng_states[:at]
        child._next_input = self._inputs[at]
        child.generator.set_state(self._rng_states[at])
        return child

    def copy(self) -> "Decoder | None":
        """An independent decode at the same point: the steps so far, a copy of the KV cache and the
        generator's state, so stepping either one leaves the other as it was. None where the cache
        cannot be copied (the caller decodes afresh instead)."""
        child = Decoder(self.lm, self.prompt, self.config, forced=self.forced)
        carry(self.processors, child.processors)
        if not self.steps:
            return child
        past = prefix_cache(self._past, len(self.prompt_ids) + len(self.steps) - 1)
        if past is None:
            return None
        child._past, child._prefill_s = past, self._prefill_s
        child.steps, child.generated, child.logprobs = list(self.steps), list(self.generated), list(self.logprobs)
        child._inputs, child._rng_states = list(self._inputs), list(self._rng_states)
        child._next_input, child.finished = self._next_input, self.finished
        child.generator.set_state(self.generator.get_state())
        return child

    # ---- the trace's parts -------------------------------------------------------
    def _sequences(self) -> list[Sequence]:
        ids, cum = list(self.generated), sum(self.logprobs)
        return [Sequence(token_ids=ids, text=self.lm.tokenizer.decode(ids, skip_special_tokens=True),
                         cum_logprob=cum, score=beam_score(cum, max(len(ids), 1), self.config.length_penalty))]

    def _forced(self) -> dict:
        return dict(self.forced)


def prefix_cache(past, rows: int):
    """A copy of a transformers DynamicCache holding its first `rows` positions; None where none can be made.

    A cache of full layers is cut to its first rows. One with sliding-window layers too (Gemma 3) is copied
    whole, and only when it holds exactly `rows` positions (a copy at the decode's own point: a look-ahead, a
    second opening of the same prompt): cutting it back would need rows its window may have let go.
    Quantised, static and other caches: None."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

    if type(past) is not DynamicCache:
        return None
    kinds = {type(layer) for layer in past.layers}
    if kinds <= {DynamicLayer}:
        cut = DynamicCache()
        for index, layer in enumerate(past.layers):
            cut.update(layer.keys[..., :rows, :].clone(), layer.values[..., :rows, :].clone(), index)
        return cut
    if kinds <= {DynamicLayer, DynamicSlidingWindowLayer} and past.get_seq_length() == rows:
        return copy.deepcopy(past)
    return None
