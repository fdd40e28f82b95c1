"""The continuation tree's speed: prefixes expanded per second against single-sequence forward passes per
second, measured in the same run on the same model.

    .venv/bin/python -m bench.bench_answers [--rounds 3] [--budget 192] [--batch 16] [--models smollm2-135m]

A single-sequence forward pass is one decode step with the KV cache (what a click on Next costs); the tree
expands `batch` prefixes per batched pass over the prompt's cached keys and values. The ratio says how many
prefixes the tree expands in one step's time. Goal: >= 4 on the CPU. The load average is printed beside
each figure.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from engine import DecodeConfig, load_model
from engine.answers import TreeSettings, grow_tree
from engine.decoding.decoder import Decoder
from engine.tokens import encode_prompt
from engine import LoadedModel

PROMPT = "What is the capital of France? Answer in one word."


def load() -> str:
    return "load %.2f/%.2f/%.2f" % os.getloadavg()


def step_seconds(lm: LoadedModel, steps: int = 24) -> float:
    """The median seconds of one decode step after the prefill (one forward pass of one new token)."""
    dec = Decoder(lm, PROMPT, DecodeConfig(max_new_tokens=steps + 1, chat=True))
    dec.step()
    times = []
    while not dec.finished:
        t0 = time.perf_counter()
        dec.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=192)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--models", default="smollm2-135m")
    args = parser.parse_args()
    for name in args.models.split(","):
        lm = load_model(name)
        ids = encode_prompt(lm, PROMPT, True, args.depth + 1)
        settings = TreeSettings(depth=args.depth, budget=args.budget, branch=8, batch=args.batch)
        grow_tree(lm, ids, settings.__class__(depth=2, budget=16, batch=args.batch))      # warm-up
        print(f"\n{name}: budget {args.budget}, batch {args.batch}, depth {args.depth}, prompt {len(ids)} tokens")
        for r in range(args.rounds):
            step = step_seconds(lm)
            t0 = time.perf_counter()
            tree = grow_tree(lm, ids, settings)
            seconds = time.perf_counter() - t0
            per_s = tree.expansions / seconds
            print(f"  round {r + 1}: {per_s:7.1f} prefixes/s in {tree.passes} passes; one step {step * 1000:6.1f} ms "
                  f"= {1 / step:6.1f} passes/s; ratio {per_s * step:5.2f} prefixes per step's time   ({load()})")


if __name__ == "__main__":
    main()
