"""The feed-back rules on the command line: their flags for `decode`, and the table of what each step fed.

Light on purpose (no PyTorch): the parser is built before any model loads.
"""
from __future__ import annotations

import math

from ..config import MAX_MTM_K, SOFT_INPUT_STRATEGIES, DecodeConfig
from ..errors import ConfigError

FLAGS = {"soft_top_k": "--soft-top-k", "cold_stop": "--cold-stop", "soft_gumbel": "--soft-gumbel",
         "soft_dirichlet": "--soft-dirichlet", "moi_beta": "--moi-beta", "mtm_k": "--mtm-k"}


def add_soft_input_arguments(parser) -> None:
    d = DecodeConfig()
    group = parser.add_argument_group(f"feed-back rules (--strategy {', '.join(SOFT_INPUT_STRATEGIES)})")
    group.add_argument("--soft-top-k", type=int, default=d.soft_top_k, metavar="K",
                       help="soft-thinking: after temperature, top-k, top-p and min-p, mix the K heaviest tokens, "
                            "renormalised (the published max_topk); 1 is greedy decoding")
    group.add_argument("--cold-stop", default=d.cold_stop, metavar="TAU:L",
                       help="soft-thinking: once L steps in a row had entropy below TAU nats (of the temperature-"
                            "scaled, untruncated distribution), feed ids: that step its emitted id, later steps a "
                            "sampled one; e.g. 0.1:4 (published: 0.01:256). Off when left out")
    group.add_argument("--soft-gumbel", type=float, default=d.soft_gumbel, metavar="TAU",
                       help="soft-thinking: Gumbel-softmax on the K weights at temperature TAU (0.5 in the "
                            "randomised replication); the emitted id becomes a sample (0: off)")
    group.add_argument("--soft-dirichlet", type=float, default=d.soft_dirichlet, metavar="ALPHA",
                       help="soft-thinking: Dirichlet noise, weights ~ Dir(ALPHA * p), before the top K (0: off)")
    group.add_argument("--moi-beta", type=float, default=d.moi_beta, metavar="B",
                       help="mixture-of-inputs: w = (Hn * p + (B + 1 - Hn) * onehot(y)) / (B + 1); larger B leans "
                            "on the sampled id y; inf is plain sampling")
    group.add_argument("--mtm-k", type=int, default=d.mtm_k, metavar="K",
                       help=f"multi-token-mean: ids drawn per step, their embeddings averaged (1..{MAX_MTM_K}); "
                            "1 is plain sampling")


def soft_flagged(exc: ConfigError) -> ConfigError:
    """A feed-back rule's error naming the flag typed (`--moi-beta: ...`); any other error as it is."""
    flag = FLAGS.get(exc.param)
    message = str(exc)
    if flag is None or not message.startswith(exc.param + ":"):
        return exc
    return ConfigError(exc.param, flag + message[len(exc.param):], exc.reason, **exc.values)


def format_fed(trace, show) -> str:
    """One line per step: what was fed (kind, the heaviest tokens and weights), the emitted token, the cosine
    between them, the participation ratio and the entropy Cold Stop reads (* where it fired)."""
    lines = [f"{'step':>4}  {'kind':<7} {'emitted':<14} {'cos':>6} {'|v|/|e|':>7} {'PR':>6} {'H':>6}  fed (weight)"]
    texts = {c.token_id: c.text for s in trace.steps for c in s.candidates}
    for step in trace.steps:
        fed = step.fed
        if fed is None:
            continue
        heavy = "  ".join(f"{show(texts.get(i, f'<id {i}>'))} {w:.3f}" for i, w in
                          zip(step.fed_ids[:4], step.fed_weights[:4])) or "the last hidden state"
        ratio = fed.norm / fed.emitted_norm if fed.emitted_norm else math.nan
        pr = "-" if math.isnan(fed.participation) else f"{fed.participation:.2f}"
        mark = "*" if fed.cold_stop else " "
        lines.append(f"{step.index + 1:>4}  {fed.kind:<7} {show(step.chosen_texts[0]):<14} {fed.emitted_cosine:>6.3f} "
                     f"{ratio:>7.3f} {pr:>6} {fed.entropy:>6.3f}{mark} {heavy}")
    lines.append("(cos, |v|/|e|: the fed vector against the emitted token's embedding; PR = 1 / sum w^2, how many "
                 "tokens are mixed; H: entropy of softmax(logits / T), nats; * Cold Stop fired)")
    return "\n".join(lines)
