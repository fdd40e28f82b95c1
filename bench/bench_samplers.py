"""The cost of every sampler stage: a decode step with the full chain of each order against the five-stage chain
(repetition penalty, temperature, top-k, top-p, min-p in transformers' order), measured in the same run.

    .venv/bin/python -m bench.bench_samplers [--steps 32] [--rounds 3] [--context 256]

1. a whole step (forward pass, the chain one stage at a time, the records) on the bundled model: the median
   over `steps` steps after the prefill, rounds interleaved, the ratio full / five (goal: at most 1.2);
2. the chain alone (the stages and their records, no forward pass) on one step's logits, after a context of
   `context` tokens (the penalties, DRY and n-gram blocking read all of it).
The machine's load (os.getloadavg, 1 minute) is printed beside each figure.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from engine import DecodeConfig, LoadedModel, load_model
from engine.samplers.chain import prepare
from engine.decoding.decoder import Decoder
from engine.samplers.shaping import build_processors
from engine.samplers.stages import staged_scores, stages_record

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time"
FIVE = dict(repetition_penalty=1.1, temperature=0.8, top_k=50, top_p=0.95, min_p=0.02)
FULL = {
    "transformers": dict(FIVE, no_repeat_ngram_size=3, top_h=0.9, typical_p=0.95, epsilon_cutoff=0.0003,
                         eta_cutoff=0.0003),
    "llama.cpp": dict(FIVE, presence_penalty=0.2, frequency_penalty=0.1, dry_multiplier=0.8, top_n_sigma=3.0,
                      typical_p=0.95, xtc_probability=0.5, xtc_threshold=0.1, dynatemp_range=0.3),
    "llama.cpp mirostat": dict(temperature=0.8, mirostat=2),
    "vllm": dict(FIVE, presence_penalty=0.2, frequency_penalty=0.1),
}


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def order_of(name: str) -> str:
    return name.split()[0]


def config(settings: dict, order: str, steps: int) -> DecodeConfig:
    return DecodeConfig(strategy="sample", sampler_order=order, max_new_tokens=steps + 1, seed=0, **settings)


def step_times(lm: LoadedModel, cfg: DecodeConfig) -> list:
    """Seconds of each step after the prefill."""
    dec = Decoder(lm, PROMPT, cfg)
    dec.step()
    out = []
    while not dec.finished:
        t = time.perf_counter()
        dec.step()
        out.append(time.perf_counter() - t)
    return out


def chain_seconds(lm: LoadedModel, cfg: DecodeConfig, context: torch.Tensor, logits: torch.Tensor,
                  repeats: int = 20) -> float:
    """Median seconds of the chain alone, one stage at a time with its records, on one step."""
    processors = build_processors(cfg)
    prepare(processors, prompt_length=context.shape[-1] // 2, token_texts=lm.token_texts, tokenize=lm.tokenize)
    ids = torch.topk(logits, 20).indices.tolist()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        staged = staged_scores(processors, context, logits[None])
        stages_record(lm.token_texts, processors, logits, staged, ids, chosen=ids[0])
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--context", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    lm = load_model()
    print(f"model {lm.name}, vocabulary {lm.facts.vocab_size:,}, {args.steps} steps x {args.rounds} rounds")

    print("\n1. a whole step (forward pass + chain + records), median ms, full chain / five-stage chain")
    five = config(FIVE, "transformers", args.steps)
    for name, settings in FULL.items():
        full = config(settings, order_of(name), args.steps)
        a, b = [], []
        for _ in range(args.rounds):          # interleaved, so a change of load touches both
            a += step_times(lm, five)
            b += step_times(lm, full)
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"  {name:<20} five {ma * 1e3:7.2f} ms   full {mb * 1e3:7.2f} ms   ratio {mb / ma:5.2f}   {load()}",
              flush=True)

    print(f"\n2. the chain alone, after a context of {args.context} tokens, median ms")
    generator = torch.Generator().manual_seed(0)
    context = torch.randint(0, lm.facts.vocab_size, (1, args.context), generator=generator)
    context[0, -8:] = context[0, 40:48]                       # a repeated run for DRY and the n-gram block
    with torch.no_grad():
        logits = lm.model(context[:, -64:].to(lm.device)).logits[0, -1].float().cpu()
    base = chain_seconds(lm, five, context, logits)
    print(f"  {'five-stage':<20} {base * 1e3:7.2f} ms   {load()}")
    for name, settings in FULL.items():
        s = chain_seconds(lm, config(settings, order_of(name), args.steps), context, logits)
        print(f"  {name:<20} {s * 1e3:7.2f} ms   ratio {s / base:5.2f}   {load()}", flush=True)


if __name__ == "__main__":
    main()
