"""Time the computations behind the three "inside the choice" pages on the bundled model.

    .venv/bin/python -m bench.bench_inside [--rounds 3]

Each page's work is timed next to a reference measured in the same run, and the ratio is
printed (absolute seconds depend on the machine and on what else it is running):
1. expected embedding: a soft lane of 32 steps (with per-step projection) vs a greedy
   decode of 32 steps; plus p^T E vs one embedding lookup;
2. teacher forcing: scoring 128 reference tokens in one pass vs a greedy decode of 128
   tokens (which is what free running costs);
3. the eps curve, 11 points on those 128 tokens, vs the same greedy decode;
4. the KV page: rebuilding per-beam cache views and paged layouts for a 4-beam, 32-step
   trace vs the beam decode itself;
5. a sampled decode of 32 steps that records all five sampler stages vs `model.generate`
   with the same settings (what recording each stage costs);
6. the logit lens for the next token (every layer through the final norm and the
   unembedding) vs one forward pass over the same prompt.
Rounds interleave the work and its reference; medians are reported.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from engine import DecodeConfig, decode, load_model
from engine.inside.embedding import feedback_cost, soft_lane
from engine.inside.kv_trace import cache_steps
from engine.inside.lens import lens_next
from engine.inside.teacher import epsilon_curve, teacher_force
from engine.tokens import encode_prompt

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time"


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def compare(name: str, rounds: int, work, reference, ref_name: str) -> float:
    """Median seconds of `work` and `reference`, interleaved; prints and returns the ratio."""
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(timed(work)[0])
        theirs.append(timed(reference)[0])
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{name:<44} {a:8.2f} s   {ref_name:<30} {b:8.2f} s   ratio {a / b:6.2f}   load {os.getloadavg()[0]:.1f}",
          flush=True)
    return a / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lm = load_model()
    print(f"model: {lm.name}; rounds: {args.rounds}; medians\n")

    # a 128-token reference continuation: the model's own sampled text, so it is natural text
    sampled = decode(lm, PROMPT, DecodeConfig(strategy="sample", max_new_tokens=160, seed=1, top_n=1))
    ref_ids = sampled.best.token_ids[:128]
    reference = lm.tokenizer.decode(ref_ids)
    n = len(teacher_force(lm, PROMPT, reference).reference_ids)
    print(f"reference: {n} tokens (re-tokenised from 128 sampled ones)\n")

    greedy32 = DecodeConfig(max_new_tokens=32, top_n=10)
    soft32 = DecodeConfig(strategy="soft", max_new_tokens=32, top_n=10)
    greedy_n = DecodeConfig(max_new_tokens=n, top_n=1)
    beam32 = DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=32, top_n=5)

    compare("soft lane, 32 steps (+ projections)", args.rounds, lambda: soft_lane(lm, PROMPT, soft32),
            lambda: decode(lm, PROMPT, greedy32), "greedy decode, 32 steps")
    cost = feedback_cost(lm, repeats=50)
    print(f"{'p^T E (one step)':<44} {cost.mixture_seconds * 1e6:8.0f} µs  {'embedding lookup':<30} "
          f"{cost.lookup_seconds * 1e6:8.1f} µs  ratio {cost.mixture_seconds / cost.lookup_seconds:6.0f}")
    compare(f"teacher forcing, {n} tokens, one pass", args.rounds,
            lambda: teacher_force(lm, PROMPT, reference), lambda: decode(lm, PROMPT, greedy_n),
            f"greedy decode, {n} tokens")
    forced = teacher_force(lm, PROMPT, reference)
    compare(f"eps curve, 11 points x {n} tokens", max(1, args.rounds - 2),
            lambda: epsilon_curve(lm, forced, points=11), lambda: decode(lm, PROMPT, greedy_n),
            f"greedy decode, {n} tokens")
    beam = decode(lm, PROMPT, beam32)
    compare("KV page views, 4 beams x 32 steps", args.rounds,
            lambda: cache_steps(beam, lm.facts.kv_bytes_per_token), lambda: decode(lm, PROMPT, beam32),
            "beam decode, 4 beams x 32 steps")

    staged = DecodeConfig(strategy="sample", max_new_tokens=32, repetition_penalty=1.3, temperature=0.7,
                          top_k=50, top_p=0.9, min_p=0.05, seed=1)
    ids = torch.tensor([encode_prompt(lm, PROMPT)], device=lm.device)
    settings = dict(do_sample=True, repetition_penalty=1.3, temperature=0.7, top_k=50, top_p=0.9, min_p=0.05,
                    max_new_tokens=32, min_new_tokens=32, pad_token_id=lm.tokenizer.eos_token_id)
    compare("sample, 32 steps, 5 stages recorded", args.rounds, lambda: decode(lm, PROMPT, staged),
            lambda: lm.model.generate(ids, attention_mask=torch.ones_like(ids), **settings),
            "generate, same settings")

    def one_forward():
        with torch.inference_mode():
            lm.model(ids)

    compare("logit lens, next token, every layer", args.rounds + 2, lambda: lens_next(lm, PROMPT), one_forward,
            "one forward pass, same prompt")


if __name__ == "__main__":
    main()
