"""Constrained decoding's cost per step, as a ratio against unconstrained decoding measured in the same run.

    .venv/bin/python -m bench.bench_structured [--rounds 3] [--tokens 32] [--models smollm2-135m,gemma3-270m]

For each bundled model and each grammar, a decode under the grammar and the same decode without one step
one token at a time (both record the top candidates and the stages, as every decode does); the ratio is the
median constrained step over the median free step, prefill left out. The grammars are chosen so neither run
ends early: a long JSON string, and a long run of lowercase words. The mask alone (llguidance's walk and
bitmask, unpacked) is timed as well. Rounds interleave the two runs; the machine's load average is printed
beside each figure, since a shared machine moves every number. Goal: ratio <= 1.3.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from engine import DecodeConfig, LoadedModel, load_model
from engine.decoding.decoder import Decoder

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time"
GRAMMARS = {
    "json": ("json_schema", json.dumps({"type": "object", "required": ["story"],
                                        "properties": {"story": {"type": "string", "maxLength": 2000}}})),
    "regex": ("regex", r"[a-z]+( [a-z]+){0,400}"),
}


def load() -> str:
    return "load %.2f/%.2f/%.2f" % os.getloadavg()


def step_times(lm: LoadedModel, config: DecodeConfig) -> tuple[list, list]:
    """(seconds of each step after the prefill, seconds of each step's mask) for one decode."""
    dec = Decoder(lm, PROMPT, config)
    dec.step()
    steps, masks = [], []
    while not dec.finished:
        t0 = time.perf_counter()
        dec.step()
        steps.append(time.perf_counter() - t0)
        if dec.grammar is not None:          # the mask alone, for the prefix this step saw (recomputed, uncached)
            prefix = tuple(dec.generated[:-1])
            dec.grammar._masks.pop(prefix, None)
            t0 = time.perf_counter()
            dec.grammar.allowed(prefix)
            masks.append(time.perf_counter() - t0)
    return steps, masks


def bench_model(name: str, rounds: int, tokens: int) -> None:
    lm = load_model(name)
    print(f"\n{name}: vocabulary {lm.facts.vocab_size:,}, {tokens} tokens, {rounds} rounds   ({load()})")
    free_config = DecodeConfig(max_new_tokens=tokens, top_n=20)
    step_times(lm, free_config)                                  # warm-up
    for label, (kind, text) in GRAMMARS.items():
        config = free_config.replace(grammar_kind=kind, grammar=text)
        step_times(lm, config)                                   # warm-up (and llguidance's tokenizer, once)
        free, constrained, masks = [], [], []
        for _ in range(rounds):
            steps, _ = step_times(lm, free_config)
            free += steps
            steps, mask = step_times(lm, config)
            constrained += steps
            masks += mask
        f, c, m = statistics.median(free), statistics.median(constrained), statistics.median(masks)
        print(f"  {label:<6} step free {1000 * f:7.2f} ms   constrained {1000 * c:7.2f} ms   "
              f"ratio {c / f:5.2f} (goal <= 1.3)   mask alone {1000 * m:6.2f} ms = {m / f:5.1%} of a free step   "
              f"({load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    args = parser.parse_args()
    print(f"constrained / unconstrained decoding time per step   ({load()}, {os.cpu_count()} cores)")
    for name in args.models.split(","):
        bench_model(name, args.rounds, args.tokens)


if __name__ == "__main__":
    main()
