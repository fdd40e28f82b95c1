"""The speculative runner: one round per `step()`, each round one target pass over K drafted tokens.

A round (K fixed per round, cut so that a round never passes max_new_tokens):
  1. the draft proposes up to K tokens after the context; a sampling draft draws each from its shaped q;
  2. the target reads the tokens it has not cached plus the drafts in one forward pass, and gives logits at
     the K + 1 positions; each is shaped with the same processors as the draft's (transformers does so too);
  3. each draft is checked in order: greedy keeps x while it is the target's own top token; sampling draws u
     and keeps x while u <= p(x) / q(x) (verify.py);
  4. at the first rejection the target's token comes from norm(max(0, p - q)) (greedy: its top token);
     when all K are kept, a bonus token comes from p at the position after them;
  5. both caches are cut back to the kept tokens; one Step is recorded per emitted token, one Round per round.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from engine.decoding.beam import beam_score
from ..config import DecodeConfig
from ..errors import ConfigError
from ..model import LoadedModel
from engine.decoding.record import candidates_record
from engine.decoding.runner import Runner
from engine.samplers.shaping import shape
from engine.samplers.stages import staged_scores, stages_record
from ..trace import DraftCheck, Round, Sequence, Step, Trace
from .drafts import make_draft
from .verify import keeps, pairs, residual, residual_tokens


class SpeculativeDecoder(Runner):
    """A speculative decode in progress; `step()` runs one round and returns its last Step."""

    def __init__(self, lm: LoadedModel, prompt: str, config: DecodeConfig, draft_lm: LoadedModel | None = None):
        if config.strategy != "speculative":
            raise ConfigError("strategy", "strategy: SpeculativeDecoder runs the strategy speculative")
        super().__init__(lm, prompt, config)
        self.draft = make_draft(lm, config.draft, draft_lm)
        self.sampling = config.verify == "sample"
        self.generator = torch.Generator().manual_seed(config.seed)
        self.generated: list[int] = []
        self.logprobs: list[float] = []
        self.rounds: list[Round] = []
        self._cached = 0                    # positions the target's cache holds

    # ---- one round -----------------------------------------------------------------
    @torch.inference_mode()
    def step(self) -> Step | None:
        if self.finished:
            return None
        t0 = time.perf_counter()
        steps, rnd = self._round()
        seconds = time.perf_counter() - t0
        self.rounds.append(dataclasses.replace(rnd, seconds=seconds))
        for step in steps:
            self.keep(step, seconds / len(steps))
        return steps[-1]

    def _choose_draft(self, shaped_rows: list):
        """The draft's choice at each position: its shaped q's top token (greedy) or a draw from q."""
        def choose(raw: torch.Tensor, context: list) -> int:
            shaped = shape(self.processors, torch.tensor([context]), raw[None])[0]
            shaped_rows.append(shaped)
            if self.sampling:
                return int(torch.multinomial(torch.softmax(shaped, -1), 1, generator=self.generator))
            return int(shaped.argmax())
        return choose

    def _round(self) -> tuple[list, Round]:
        lm, config = self.lm, self.config
        context = self.prompt_ids + self.generated
        room = config.max_new_tokens - len(self.generated)
        k = min(config.draft_tokens, room - 1)              # the target adds one token of its own
        # 1. the draft proposes k tokens, with the distribution q it drew each from
        shaped_q: list = []
        proposal = self.draft.propose(context, k, self._choose_draft(shaped_q)) if k > 0 else None
        drafts = list(proposal.ids) if proposal is not None else []
        vocab = lm.facts.vocab_size
        if proposal is not None and proposal.logits is not None:
            q = [torch.softmax(row, -1) for row in shaped_q]
        else:                                               # no distribution: q is one-hot on each drafted id
            q = [torch.nn.functional.one_hot(torch.tensor(t), vocab).to(torch.float32) for t in drafts]

        # 2. one target pass over the uncached tail and the drafts: logits at the len(drafts) + 1 positions
        raw = self._verify_pass(context[self._cached:] + drafts, len(drafts) + 1)
        staged, shaped_p, p = [], [], []
        for i in range(len(drafts) + 1):
            stages = staged_scores(self.processors, torch.tensor([context + drafts[:i]]), raw[i][None])
            staged.append(stages)
            shaped_p.append(stages[-1][0] if stages else raw[i].clone())
            p.append(torch.softmax(shaped_p[-1], -1))

        # 3. check the drafts in order; 4. the target's own token, unless a kept end-of-text ended the decode
        checks, kept, ended = self._check_drafts(drafts, p, q, shaped_p)
        next_id, kind = (None, "none") if ended else self._target_token(len(drafts), kept, p, q, shaped_p)
        q_next = q[kept] if kept < len(drafts) else None

        # 5. cut the caches back to the context and the kept drafts; record
        keep_len = len(context) + kept
        if self._past is not None and self._cached > keep_len:
            self._past.crop(keep_len - self._cached)
            self._cached = keep_len
        self.draft.keep(keep_len)
        emitted = drafts[:kept] + ([next_id] if next_id is not None else [])
        steps = [self._record(raw[i], staged[i], shaped_p[i], token)
                 for i, token in enumerate(emitted)]
        rnd = Round(index=len(self.rounds), first_step=len(self.steps), drafts=checks, next_id=next_id,
                    next_text=lm.token_texts[next_id] if next_id is not None else "", next_kind=kind,
                    next_candidates=pairs(lm.token_texts, p[kept], q_next, must=next_id),
                    target_passes=1,
                    draft_passes=proposal.passes if proposal is not None else 0)
        return steps, rnd

    def _check_drafts(self, drafts: list, p: list, q: list, shaped_p: list) -> tuple[list, int, bool]:
        """3. Each draft in order, against the target: kept with probability min(1, p/q) when sampling (the
        target's argmax when greedy), up to the first rejection or a kept end-of-text. Returns the checks (the
        drafts after the stop "unchecked"), how many were kept, and whether a kept end-of-text ended the decode."""
        lm = self.lm
        checks, kept, ended = [], 0, False
        for i, x in enumerate(drafts):
            p_x, q_x = float(p[i][x]), float(q[i][x])
            u = float(torch.rand((), generator=self.generator)) if self.sampling else None
            ok = keeps(u, p_x, q_x) if self.sampling else x == int(shaped_p[i].argmax())
            rest, mass = residual(p[i], q[i])
            checks.append(DraftCheck(token_id=x, text=lm.token_texts[x], q=q_x, p=p_x, u=u,
                                     status="kept" if ok else "rejected",
                                     candidates=pairs(lm.token_texts, p[i], q[i], must=x),
                                     residual=residual_tokens(lm.token_texts, rest) if not ok and self.sampling else [],
                                     residual_mass=mass))
            if not ok:
                break
            kept += 1
            if x in lm.eos_token_ids:                       # a kept end-of-text ends the decode here
                ended = True
                break
        for x in drafts[len(checks):]:
            checks.append(DraftCheck(token_id=x, text=lm.token_texts[x], q=0.0, p=0.0, u=None, status="unchecked"))
        return checks, kept, ended

    def _target_token(self, drafted: int, kept: int, p: list, q: list, shaped_p: list) -> tuple[int, str]:
        """4. The target's own token after `kept` of `drafted` drafts: drawn from the residual max(0, p - q) at the
        first rejection ("corrected"), or from p after all were kept ("bonus"); the argmax when greedy."""
        if kept < drafted:
            kind = "corrected"
            target = residual(p[kept], q[kept])[0] if self.sampling else None
        else:
            kind, target = "bonus", p[kept] if self.sampling else None
        if self.sampling:
            return int(torch.multinomial(target, 1, generator=self.generator)), kind
        return int(shaped_p[kept].argmax()), kind

    def _verify_pass(self, feed: list, positions: int) -> torch.Tensor:
        """[positions, V] the target's raw logits at the last `positions` positions of `feed`."""
        t0 = time.perf_counter()
        kwargs = {"logits_to_keep": positions} if self._fwd else {}
        out = self.lm.model(input_ids=torch.tensor([feed], device=self.lm.device), past_key_values=self._past,
                            use_cache=True, **kwargs)
        if self._past is None:
            self._prefill_s = time.perf_counter() - t0
            if hasattr(out.past_key_values, "activate_past_recording"):
                out.past_key_values.activate_past_recording()
        self._past = out.past_key_values
        self._cached += len(feed)
        return out.logits[0, -positions:].to("cpu", torch.float32)

    def _record(self, raw: torch.Tensor, staged: list, shaped: torch.Tensor, token: int) -> Step:
        """The Step of one emitted token: the target's distribution at its position, as every decoder records it."""
        lm = self.lm
        dist = candidates_record(lm, raw, shaped, self.config.top_n, must_include=(token,))
        stages = stages_record(lm.token_texts, self.processors, raw, staged, [c.token_id for c in dist.candidates])
        self.generated.append(token)
        self.logprobs.append(float(torch.log_softmax(raw, -1)[token]))
        if token in lm.eos_token_ids or len(self.generated) >= self.config.max_new_tokens:
            self.finished = True
        return Step(index=len(self.generated) - 1, chosen_ids=[token],
                    chosen_texts=[lm.token_texts[token]], candidates=dist.candidates, entropy=dist.entropy,
                    varentropy=dist.varentropy,
                    shaped_entropy=dist.shaped_entropy, removed_mass=dist.removed_mass, kept_count=dist.kept_count,
                    stages=stages)

    # ---- the trace's parts -------------------------------------------------------------
    def trace(self) -> Trace:
        return dataclasses.replace(super().trace(), rounds=list(self.rounds))

    def _sequences(self) -> list[Sequence]:
        ids, cum = list(self.generated), sum(self.logprobs)
        return [Sequence(token_ids=ids, text=self.lm.tokenizer.decode(ids, skip_special_tokens=True),
                         cum_logprob=cum, score=beam_score(cum, max(len(ids), 1), self.config.length_penalty))]

    def _timings(self, decode_s: float) -> dict:
        target = sum(r.target_passes for r in self.rounds)
        return {"target_passes": target, "draft_passes": sum(r.draft_passes for r in self.rounds),
                "rounds": len(self.rounds), "target_passes_per_token": target / max(len(self.generated), 1)}
