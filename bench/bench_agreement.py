"""Agreement's cost at its bounds, as a ratio to the run's own sampling time.

    .venv/bin/python -m bench.bench_agreement [--rounds 2] [--samples 256] [--candidates 64] [--models smollm2-135m]

For each prompt: the tree (budget 400) and N samples are grown once, the samples timed; then the agreement
(64 candidates against every answer with exact p, up to 64 + 256 columns) is computed under each utility,
and its seconds are printed beside the sampling's and as their ratio. A last line times the bound itself on
made-up answers: 64 candidates x 320 columns of 40-token answers, texts of about 200 characters. The load
average is printed beside each figure (the machine is shared).
"""
from __future__ import annotations

import argparse
import os
import random
import time

from engine import load_model
from engine.answers import TreeSettings, draw_samples, grow_tree
from engine.answers.agreement import (MAX_CANDIDATES, MAX_EVIDENCE, UTILITIES, Evidence, Known, agree, expectation)
from engine.answers.run import AnswersRun, _rank_sample
from engine.config import MAX_ANSWER_SAMPLES
from engine.tokens import encode_prompt

PROMPTS = ("What is the capital of France? Answer in one word.", "Write a haiku about the sea.")


def load() -> str:
    return "load %.2f/%.2f/%.2f" % os.getloadavg()


def made_up(n: int, rng: random.Random, words: list) -> list:
    """n distinct answers of 40 tokens, about 200 characters each."""
    out = []
    for i in range(n):
        ids = tuple(rng.randrange(50_000) for _ in range(40))
        out.append(Known(ids, " ".join(rng.choice(words) for _ in range(36)) + f" {i}", -rng.uniform(1, 30)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--samples", type=int, default=MAX_ANSWER_SAMPLES)
    parser.add_argument("--candidates", type=int, default=MAX_CANDIDATES)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--models", default="smollm2-135m")
    args = parser.parse_args()
    for name in args.models.split(","):
        lm = load_model(name)
        settings = TreeSettings(depth=args.depth, budget=args.budget, branch=8, batch=16)
        for prompt in PROMPTS:
            ids = encode_prompt(lm, prompt, True, args.depth + 1)
            tree = grow_tree(lm, ids, settings)
            t0 = time.perf_counter()
            summary = draw_samples(lm, ids, settings, args.samples, seed=0)
            sampling = time.perf_counter() - t0
            run = AnswersRun(lm.name, prompt, True, tree, (), summary,
                             tuple(_rank_sample(tree, o) for o in summary.outcomes if o.complete))
            print(f"\n{name}: {prompt!r}: {args.samples} samples in {sampling:.2f} s ({load()}); tree "
                  f"{tree.expansions} expansions in {tree.seconds:.2f} s")
            for r in range(args.rounds):
                for u in UTILITIES:
                    t0 = time.perf_counter()
                    got = agree(run, [u], args.candidates)
                    seconds = time.perf_counter() - t0
                    print(f"  round {r + 1} {u:<5}: {len(got.candidates)} candidates x {len(got.evidence.answers)} "
                          f"columns in {seconds * 1000:8.1f} ms = {seconds / sampling:6.3f} x the sampling  ({load()})")
    rng = random.Random(0)
    words = "the sea and its waves fold over grey stones while gulls cry above a quiet harbour at dawn".split()
    columns = made_up(MAX_CANDIDATES + MAX_EVIDENCE, rng, words)
    evidence = Evidence(tuple(columns), 0.1, 0, 0)
    print(f"\nat the bound: {MAX_CANDIDATES} candidates x {len(columns)} columns of 40-token answers")
    for u in UTILITIES:
        t0 = time.perf_counter()
        expectation(u, columns[:MAX_CANDIDATES], evidence)
        print(f"  {u:<5}: {(time.perf_counter() - t0) * 1000:8.1f} ms   ({load()})")


if __name__ == "__main__":
    main()
