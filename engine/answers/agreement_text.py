"""The agreement as the command line prints it: per utility, each candidate's probability and rank, its expected
utility's range from the exact tree and its estimate from the samples, the winner and its certificate."""
from __future__ import annotations

import math

UTILITY_NAMES = {"exact": "exact match on token ids", "text": "match of normalised text",
                 "chrf": "chrF (hypothesis first, /100)", "edit": "edit similarity on token ids"}


def _show(text: str) -> str:
    return repr(text) if text else "'' (the empty answer)"


def format_agreement(agreement, distribution: str) -> str:
    ev = agreement.evidence
    lines = [f"agreement (minimum Bayes risk) over {distribution}:",
             f"  evidence: {len(ev.answers)} answers with exact p ({ev.found:.4f} of the mass; {ev.rest:.4f} not "
             f"found, agreeing with anything from nothing to all)"
             + (f"; {ev.samples} samples, {ev.samples - ev.unended} of them ended" if ev.samples else "; no samples"),
             f"  {len(agreement.candidates)} candidates (at most {agreement.limit}): the tree's top answers, "
             "greedy's and the beams', the samples'"]
    if agreement.majority is not None:
        m = agreement.majority
        lines.append(f"  majority of {m.of} samples (self-consistency): {_show(m.answer.text)}, "
                     f"{m.votes}/{m.of} votes by normalised text")
    if not agreement.results:
        return "\n".join(lines + ["  no complete answer to choose from"])
    for name, r in agreement.results.items():
        lines += ["", f"utility: {name} ({UTILITY_NAMES[name]})",
                  f"  {'rank':>5}  {'p':>10}  {'E exact range':>17}  {'E samples ± se':>17}  answer"]
        for i, c in enumerate(agreement.candidates):
            rank = f"{agreement.ranks[i]}" + ("" if agreement.sure[i] else "?")
            sampled = "–" if r.estimate is None else (
                f"{r.estimate[i]:.4f}" + ("" if math.isnan(r.stderr[i]) else f" ± {r.stderr[i]:.4f}"))
            marks = [w for w, j in (("MBR", r.winner), ("MBR over samples", r.sample_winner),
                                    ("mode", agreement.mode)) if j == i]
            lines.append(f"  {rank:>5}  {c.prob:>10.4e}  {r.lower[i]:.4f} – {r.upper[i]:.4f}  {sampled:>17}  "
                         f"{_show(c.text)}" + (f"  ({', '.join(marks)})" if marks else ""))
        won = agreement.candidates[r.winner]
        verdict = (f"certified: the best of these candidates whatever the answers not found are (margin "
                   f"{r.margin:.4f})" if r.certified else
                   f"not certified: a rival's upper bound is above its lower bound by {-r.margin:.4f}")
        lines.append(f"  winner: {_show(won.text)}; {verdict}")
    lines.append("  (? : a rank among the answers found; one not found could be more probable)")
    return "\n".join(lines)
