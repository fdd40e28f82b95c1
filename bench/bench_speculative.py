"""Speculative decoding against plain greedy decoding, measured in the same run, on both bundled models.

    .venv/bin/python -m bench.bench_speculative [--tokens 24] [--models smollm2-135m,gemma3-270m]

For each draft kind and K: target passes per token, the acceptance rate alpha, and wall time divided by plain
greedy decoding's (the reference, measured just before each speculative run so both see the same load).
The machine's load (os.getloadavg, 1 minute) is printed beside each figure. Greedy checking throughout, so
every speculative run must give plain greedy's ids (checked, and printed as "same").
"""
from __future__ import annotations

import argparse
import os
import time

from engine import DecodeConfig, LoadedModel, decode, load_model
from engine.speculative.summary import acceptance

PROMPTS = {"smollm2-135m": "List the capitals: France: Paris. Italy: Rome. Spain: Madrid. Germany: Berlin. Portugal:",
           "gemma3-270m": "中国的首都是北京。日本的首都是东京。韩国的首都是首尔。法国的首都是"}


def drafts_for(lm: LoadedModel) -> list:
    layers = lm.facts.layers
    return [f"early-exit:{layers // 2}", f"early-exit:{(3 * layers) // 4}", "prompt-lookup:2"]


def timed(lm: LoadedModel, prompt: str, config: DecodeConfig):
    t0 = time.perf_counter()
    trace = decode(lm, prompt, config)
    return time.perf_counter() - t0, trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--ks", default="2,4")
    args = parser.parse_args()
    print(f"{'model':<13} {'draft':<16} {'K':>2} {'passes/token':>12} {'alpha':>6} {'tok/round':>9} "
          f"{'wall/plain':>10} {'same':>5} {'load':>5}")
    for name in args.models.split(","):
        lm = load_model(name)
        prompt = PROMPTS.get(name, PROMPTS["smollm2-135m"])
        decode(lm, prompt, DecodeConfig(max_new_tokens=2))            # warm up
        for spec in drafts_for(lm):
            for k in (int(x) for x in args.ks.split(",")):
                plain_s, plain = timed(lm, prompt, DecodeConfig(max_new_tokens=args.tokens))
                spec_s, trace = timed(lm, prompt, DecodeConfig(strategy="speculative", draft=spec, draft_tokens=k,
                                                               max_new_tokens=args.tokens))
                acc = acceptance(trace)
                same = trace.best.token_ids == plain.best.token_ids
                print(f"{name:<13} {spec:<16} {k:>2} {acc.target_passes / max(acc.tokens, 1):>12.2f} "
                      f"{acc.alpha:>6.2f} {acc.tokens_per_round:>9.2f} {spec_s / plain_s:>10.2f} "
                      f"{'yes' if same else 'NO':>5} {os.getloadavg()[0]:>5.2f}", flush=True)


if __name__ == "__main__":
    main()
