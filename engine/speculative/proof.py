"""Drawing one next token many times by speculative sampling, to check it against the target's p.

Each draw: x ~ q, u ~ U(0, 1), keep x when u <= p(x) / q(x), else draw from the residual. Three rules:
  - "exact": the residual is norm(max(0, p - q)), as in verify.py: the draws follow p;
  - "residual_is_p": a rejection draws from p itself (a common slip): tokens q likes come out too often;
  - "ids_only": the verifier is handed the drafted id but not q, so it takes q as one-hot on x: it keeps x with
    chance p(x) and otherwise draws from p without x. This still follows p, but keeps far fewer drafts:
    sum_x q(x) p(x) instead of sum_x min(p(x), q(x)).
The goodness of fit is Pearson's chi-square test; its p-value is the chi-square survival function,
Q(dof / 2, chi2 / 2), the regularised upper incomplete gamma function (torch.special.gammaincc).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError
from engine.samplers.chain import prepare
from engine.samplers.shaping import build_processors, shape
from engine.tokens import encode_prompt
from .drafts import make_draft
from .verify import residual

RULES = ("exact", "residual_is_p", "ids_only")
MIN_EXPECTED = 5.0        # Pearson's rule of thumb: bins expecting fewer draws are pooled into one


def draw_next(p: torch.Tensor, q: torch.Tensor, n: int, generator: torch.Generator,
              rule: str = "exact") -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [n], kept [n] bool): n independent speculative draws of one token. p, q: [V] probabilities."""
    drafted = torch.multinomial(q, n, replacement=True, generator=generator)
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    p64, q64 = p.to(torch.float64), q.to(torch.float64)
    if rule == "ids_only":
        kept = u <= p64[drafted]
        other = _draw_avoiding(p, drafted, generator)
    else:
        kept = u <= p64[drafted] / q64[drafted]
        target = residual(p, q)[0] if rule == "exact" else p
        other = torch.multinomial(target, n, replacement=True, generator=generator)
    return torch.where(kept, drafted, other), kept


def _draw_avoiding(p: torch.Tensor, avoid: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw from p conditioned on differing from avoid[i], per row: draw from p, redraw the rows that hit
    their avoided token (exact, and it ends: each redraw hits with chance p(avoid) < 1)."""
    out = torch.multinomial(p, avoid.shape[0], replacement=True, generator=generator)
    clash = out == avoid
    while bool(clash.any()):
        out[clash] = torch.multinomial(p, int(clash.sum()), replacement=True, generator=generator)
        clash = out == avoid
    return out


def draw_plain(p: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    return torch.multinomial(p, n, replacement=True, generator=generator)


@dataclass(frozen=True)
class Fit:
    """How far n draws are from p: total variation of the histogram, and Pearson's test."""
    draws: int
    tv: float              # 1/2 sum |counts / n - p|
    chi2: float
    dof: int               # bins - 1
    p_value: float         # chance of a chi2 this large if the draws follow p


def fit(counts: torch.Tensor, p: torch.Tensor) -> Fit:
    """counts [V] of n draws against p [V]. Tokens expecting fewer than 5 draws are pooled into one bin."""
    counts = counts.to(torch.float64)
    p = p.to(torch.float64)
    n = float(counts.sum())
    expected = p * n
    big = expected >= MIN_EXPECTED
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    exp = torch.cat([expected[big], expected[~big].sum()[None]])
    if float(exp[-1]) < MIN_EXPECTED:           # a pooled bin too small to test: fold it into the largest bin
        top = int(exp[:-1].argmax()) if exp.shape[0] > 1 else 0
        obs[top] += obs[-1]
        exp[top] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    live = exp > 0
    chi2 = float(((obs[live] - exp[live]) ** 2 / exp[live]).sum())
    if float(obs[~live].sum()) > 0:             # a draw of a token p gives no chance: as far from p as can be
        chi2 = float("inf")
    dof = max(int(live.sum()) - 1, 1)
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                            torch.tensor(chi2 / 2, dtype=torch.float64)))
    tv = 0.5 * float((counts / max(n, 1.0) - p).abs().sum())
    return Fit(draws=int(n), tv=tv, chi2=chi2, dof=dof, p_value=p_value)


def histogram(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    return torch.bincount(tokens, minlength=vocab)


@torch.inference_mode()
def first_position(lm, prompt: str, config, draft_lm=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, q) [V] at the prompt's next position: the target's and the draft's shaped distributions, as a
    speculative round sees them. A prompt-lookup draft has no distribution: its q is one-hot on its token."""
    config.validate(lm.facts.vocab_size)
    processors = build_processors(config)
    context = encode_prompt(lm, prompt, config.chat, 1)
    prepare(processors, prompt_length=len(context), token_texts=lm.token_texts,   # all of it is prompt here
            tokenize=lm.tokenize)
    rows = []

    def choose(raw, ctx):
        rows.append(shape(processors, torch.tensor([ctx]), raw[None])[0])
        return int(rows[-1].argmax())

    proposal = make_draft(lm, config.draft, draft_lm).propose(context, 1, choose)
    if not proposal.ids:
        raise ConfigError("draft", "draft: the prompt-lookup draft finds no earlier occurrence of the prompt's "
                                   "last tokens, so it drafts nothing here", "lookup_nothing")
    if proposal.logits is not None:
        q = torch.softmax(rows[0], -1)
    else:
        q = torch.nn.functional.one_hot(torch.tensor(proposal.ids[0]), lm.facts.vocab_size).to(torch.float32)
    logits = lm.model(input_ids=torch.tensor([context], device=lm.device)).logits[0, -1].to("cpu", torch.float32)
    p = torch.softmax(shape(processors, torch.tensor([context]), logits[None])[0], -1)
    return p, q
