"""One run: the prompt decoded alone or inside a batch, with its prompt prefilled whole, in chunks or a token at a
time, and its tokens produced one pass each or K at a time by verify passes; the logits of the prompt's row at
every step are kept, as the model returned them.

Greedy picks the argmax of the logits. Seeded sampling picks the argmax of logits / T + g, with g Gumbel noise
drawn from the seed (the Gumbel-max trick: a draw from softmax(logits / T)): the noise at step t is the same in
every run, so two runs can part only where their logits differ, and the near-tie test in compare.py holds for
sampling too, on those scores.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..model import LoadedModel
from .batches import Batch, make_batch
from .invariant import batch_invariant
from .precision import in_dtype
from .settings import prefill_name


@dataclass(frozen=True)
class RunSpec:
    """How one run decodes. verify K > 0: after the prefill, tokens come from K-token verify passes whose drafts
    are the reference run's own tokens (a perfect draft: only the arithmetic can make the target disagree)."""
    batch_size: int = 1
    fill: str = "same"
    chunk: int = 0                   # prefill: 0 whole, 1 stepwise, C chunks of C tokens
    dtype: str = "float32"
    invariant: bool = False
    verify: int = 0

    @property
    def prefill(self) -> str:
        return prefill_name(self.chunk)


class Picker:
    """Greedy (temperature 0) or seeded Gumbel-max sampling; `scores(row, t)` are the numbers whose argmax is the
    token, in float64 (exact for float32 and bfloat16 logits when greedy)."""

    def __init__(self, temperature: float = 0.0, seed: int = 0, offset: int = 0):
        self.temperature, self.seed, self.offset = float(temperature), int(seed), int(offset)
        self._noise: list = []
        self._generator = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def noise(self, step: int, vocab: int) -> torch.Tensor:
        if self._generator is None:
            self._generator = torch.Generator().manual_seed(self.seed)
        while len(self._noise) <= step:
            u = torch.rand(vocab, generator=self._generator, dtype=torch.float64).clamp_(1e-300, 1 - 2**-53)
            self._noise.append(-torch.log(-torch.log(u)))
        return self._noise[step]

    def scores(self, logits: torch.Tensor, step: int) -> torch.Tensor:
        values = logits.detach().to("cpu", torch.float64)
        if self.greedy:
            return values
        return values / self.temperature + self.noise(step + self.offset, values.shape[-1])

    def later(self, steps: int) -> "Picker":
        """The same picker for a run that starts `steps` steps in (a fork): step 0 there draws step `steps`' noise."""
        picker = Picker(self.temperature, self.seed, self.offset + steps)
        picker._generator, picker._noise = self._generator, self._noise
        return picker

    def choose(self, logits: torch.Tensor, step: int) -> int:
        return int(torch.argmax(self.scores(logits, step)))


@dataclass
class Run:
    spec: RunSpec
    token_ids: list
    logits: torch.Tensor             # [steps, V] the prompt's row, in the run's dtype, on the CPU
    seconds: float = 0.0
    passes: int = 0                  # forward passes (prefill pieces included)
    ended: bool = False              # stopped at an end-of-text token
    label: str = ""
    extra: dict = field(default_factory=dict)


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Each row's token positions from its attention mask (0 for padding, as `generate` does)."""
    positions = mask.long().cumsum(-1) - 1
    return positions.masked_fill(mask == 0, 1)


class BatchStepper:
    """A batch's forward passes through one cache, remembering each row's mask and next position."""

    def __init__(self, lm: LoadedModel, batch: Batch):
        from transformers import DynamicCache

        self.lm, self.model = lm, lm.model
        self.device = lm.device
        self.cache = DynamicCache(config=self.model.config)
        self.mask = torch.zeros(batch.size, 0, dtype=torch.long)
        self.next_position = torch.zeros(batch.size, dtype=torch.long)
        self.passes = 0

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """Feed ids [B, n] (mask [B, n]); the logits [B, keep, V] at the last `keep` positions."""
        full = torch.cat([self.mask, mask], dim=1)
        positions = (_positions(full)[:, -ids.shape[1]:] if self.mask.shape[1] == 0 or (full == 0).any()
                     else self.next_position[:, None] + torch.arange(ids.shape[1])[None])
        out = self.model(input_ids=ids.to(self.device), attention_mask=full.to(self.device),
                         position_ids=positions.to(self.device), past_key_values=self.cache, use_cache=True,
                         logits_to_keep=keep)
        self.cache = out.past_key_values
        self.mask = full
        self.next_position = positions[:, -1] + 1
        self.passes += 1
        return out.logits[:, -keep:].detach()

    def prefill(self, batch: Batch, chunk: int) -> torch.Tensor:
        """The prompt (every row) in one pass, or `chunk` columns a pass; the last position's logits [B, V]."""
        width = batch.input_ids.shape[1]
        step = width if chunk == 0 else chunk
        logits = None
        for start in range(0, width, step):
            logits = self.forward(batch.input_ids[:, start:start + step], batch.attention_mask[:, start:start + step])
        return logits[:, -1]

    def crop(self, length: int) -> None:
        """Forget every cached position from `length` on (the rejected part of a verify pass)."""
        if length < self.mask.shape[1]:
            self.cache.crop(length - self.mask.shape[1])     # a negative count: remove that many positions
        self.mask = self.mask[:, :length]
        self.next_position = _positions(self.mask)[:, -1] + 1


def decode_run(lm: LoadedModel, prompt_ids: list, spec: RunSpec, max_new_tokens: int, picker: Picker | None = None,
               drafts: list | None = None, label: str = "") -> Run:
    """Decode `max_new_tokens` tokens (fewer when the prompt's row picks an end-of-text token) with `spec`.
    The filler rows decode greedily and never stop; only the prompt's row is recorded. `drafts`: the tokens a
    verify run checks (the reference run's), needed when spec.verify > 0."""
    picker = picker or Picker()
    model_lm = in_dtype(lm, spec.dtype)
    batch = make_batch(lm, prompt_ids, spec.batch_size, spec.fill)
    eos = set(lm.eos_token_ids)
    row = batch.row
    tokens, rows = [], []
    start = time.perf_counter()
    with torch.inference_mode(), batch_invariant(spec.invariant):
        stepper = BatchStepper(model_lm, batch)
        logits = stepper.prefill(batch, spec.chunk)                  # [B, V] for step 0
        pending = []                                                  # logits rows of a verify pass not yet used
        while True:
            step = len(tokens)
            rows.append(logits[row].to("cpu", copy=True))
            token = picker.choose(logits[row], step)
            tokens.append(token)
            ended = token in eos
            if ended or len(tokens) >= max_new_tokens:
                break
            if pending:                                               # the verify pass already scored this step
                fed = pending.pop(0)
                if fed[0] == token:
                    logits = fed[1]
                    continue
                stepper.crop(fed[2])                                  # the draft was wrong: drop what it fed
                pending = []
            others = logits.argmax(-1).cpu()
            others[row] = token
            if spec.verify > 0 and drafts is not None and len(drafts) > len(tokens) \
                    and tokens == list(drafts[:len(tokens)]):          # after a divergence the drafts are stale
                logits, pending = _verify(stepper, batch.size, row, token, others, drafts, len(tokens), spec.verify,
                                          max_new_tokens)
            else:
                logits = stepper.forward(others[:, None], torch.ones(batch.size, 1, dtype=torch.long))[:, -1]
    seconds = time.perf_counter() - start
    return Run(spec=spec, token_ids=tokens, logits=torch.stack(rows), seconds=seconds, passes=stepper.passes,
               ended=ended, label=label)


def _verify(stepper: BatchStepper, size: int, row: int, token: int, others: torch.Tensor, drafts: list, done: int,
            k: int, max_new_tokens: int):
    """One verify pass: the token just chosen and up to k - 1 drafted tokens after it, scored at once. Returns the
    logits for the next step and, for each later position, (the draft fed there, its logits, the cache length to
    keep if the run picks another token there)."""
    fed = [token] + list(drafts[done:done + k - 1])
    fed = fed[:max(1, max_new_tokens - done)]
    n = len(fed)
    ids = torch.tensor([fed] * size, dtype=torch.long)
    ids[:, 0] = others
    before = stepper.mask.shape[1]
    out = stepper.forward(ids, torch.ones(size, n, dtype=torch.long), keep=n)      # [B, n, V]
    pending = [(fed[j], out[:, j], before + j) for j in range(1, n)]
    return out[:, 0], pending
