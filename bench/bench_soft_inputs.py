"""The step time of each feed-back rule against the greedy step, in the same run, with the machine's load.

    .venv/bin/python -m bench.bench_soft_inputs [--model smollm2-135m] [--steps 32] [--rounds 3]

The lanes (greedy, p^T E, Soft Thinking with and without Gumbel noise, Mixture of Inputs, the hidden state, the
multi-token mean) run on one prompt and seed, one step of each in turn (engine.soft_inputs.lanes), so a change of
load touches all of them alike. Per lane: the median whole step after the prefill (forward pass, the rule, the
records and measures) and its ratio to greedy's; the median of the rule alone (forming the input); the
multiply-adds of forming the input from the model's shapes (V*d for p^T E, k*d for a top-k mixture).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics

import torch

from engine import DecodeConfig, load_model
from engine.soft_inputs.lanes import SoftLanes
from engine.soft_inputs.rules import multiply_adds

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time"
CHAIN = dict(temperature=0.8, top_k=30, top_p=0.95, min_p=0.001)        # Soft Thinking's published chain
LANES = {
    "greedy": dict(strategy="greedy"),
    "p^T E (soft)": dict(strategy="soft", **CHAIN),
    "soft-thinking k=10": dict(strategy="soft-thinking", soft_top_k=10, **CHAIN),
    "soft-thinking gumbel 0.5": dict(strategy="soft-thinking", soft_top_k=10, soft_gumbel=0.5, **CHAIN),
    "mixture-of-inputs b=1": dict(strategy="mixture-of-inputs", moi_beta=1.0, **CHAIN),
    "hidden-state": dict(strategy="hidden-state"),
    "multi-token-mean K=4": dict(strategy="multi-token-mean", mtm_k=4, **CHAIN),
}


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    lm = load_model(args.model)
    V, d = lm.facts.vocab_size, lm.facts.hidden_size
    print(f"model {lm.name}, V {V:,}, d {d:,}, V*d {V * d:,}; {args.steps} steps x {args.rounds} rounds; {load()}")
    configs = [DecodeConfig(max_new_tokens=args.steps + 1, seed=0, **settings) for settings in LANES.values()]
    steps = {name: [] for name in LANES}
    rules = {name: [] for name in LANES}
    for _ in range(args.rounds):
        for name, run in zip(LANES, SoftLanes(lm, PROMPT, configs, batched=False).run()):
            steps[name] += [s.seconds for s in run.trace.steps[1:]]
            rules[name] += [s.fed.rule_seconds for s in run.trace.steps[1:] if s.fed is not None]
    base = statistics.median(steps["greedy"])
    print(f"\n{'lane':<26} {'step ms':>8} {'/ greedy':>8} {'rule ms':>8} {'input MACs':>12}")
    for name, config in zip(LANES, configs):
        step = statistics.median(steps[name])
        rule = statistics.median(rules[name]) if rules[name] else math.nan
        macs = multiply_adds(config.strategy, V, d, config.soft_top_k, config.mtm_k)
        print(f"{name:<26} {step * 1e3:8.2f} {step / base:8.2f} {rule * 1e3:8.3f} {macs:>12,}")
    print(f"\n{load()}  (p^T E's V*d is computed inside the soft lane's choice, not timed apart: see its step)")


if __name__ == "__main__":
    main()
