"""What a 262,144-token vocabulary costs: the two bundled models side by side.

    .venv/bin/python -m bench.bench_vocab [--tokens 24]

For SmolLM2-135M (49,152 tokens) and Gemma 3 270M (262,144), measured in the same run:
cached load; greedy tok/s of the engine vs model.generate; one soft step vs one greedy step;
p^T E and the nearest-token search alone; the bytes of a trace per step, as JSON.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from engine import DecodeConfig, decode, load_model
from engine.decoding.decoder import Decoder
from engine.inside.embedding import feedback_cost
from engine.decoding.record import feedback_record

PROMPTS = {"smollm2-135m": "The capital of France is", "gemma3-270m": "中国的首都是"}


def median_s(fn, repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@torch.inference_mode()
def measure(key: str, tokens: int) -> None:
    lm = load_model(key)
    prompt = PROMPTS[key]
    f = lm.facts
    print(f"\n{f.name}: vocabulary {f.vocab_size:,}, hidden {f.hidden_size}, "
          f"E {f.vocab_size * f.hidden_size * 4 / 2**20:.0f} MiB in float32; "
          f"loaded in {lm.load_seconds:.1f} s ({'cached' if lm.from_cache else 'first load'})")
    config = DecodeConfig(strategy="greedy", max_new_tokens=tokens)
    trace = decode(lm, prompt, config)
    ids = trace.prompt_token_ids
    n = len(trace.steps)

    def reference():
        return lm.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                                 attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 pad_token_id=lm.tokenizer.pad_token_id or 0)
    ours, theirs = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        trace = decode(lm, prompt, config)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        out = reference()
        theirs.append(time.perf_counter() - t0)
    same = trace.best.token_ids == out[0, len(ids):len(ids) + n].tolist()
    a, b = n / statistics.median(ours), n / statistics.median(theirs)
    print(f"  greedy {n} tokens: engine {a:.1f} tok/s, generate {b:.1f} tok/s, ratio {a / b:.2f}; "
          f"tokens {'equal' if same else 'DIFFERENT'}; text {trace.best.text!r}")

    def step_ms(strategy: str) -> float:
        decoder = Decoder(lm, prompt, DecodeConfig(strategy=strategy, max_new_tokens=8))
        decoder.step()
        times = []
        for _ in range(6):
            t0 = time.perf_counter()
            decoder.step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1000
    soft, greedy = step_ms("soft"), step_ms("greedy")
    cost = feedback_cost(lm, repeats=10)
    p = torch.softmax(torch.randn(f.vocab_size, generator=torch.Generator().manual_seed(0)), -1)
    vector = p @ lm.embeddings
    search = median_s(lambda: feedback_record(lm, p, vector)) * 1000
    print(f"  one step: soft {soft:.0f} ms vs greedy {greedy:.0f} ms (x{soft / greedy:.2f}); "
          f"p^T E {cost.mixture_seconds * 1000:.1f} ms ({cost.mixture_multiply_adds / 1e6:.0f} M multiply-adds, "
          f"{cost.mixture_bytes_read / 2**20:.0f} MiB read); nearest tokens + record {search:.1f} ms")
    greedy_json = len(trace.to_json().encode())
    soft_trace = decode(lm, prompt, DecodeConfig(strategy="soft", max_new_tokens=tokens))
    soft_json = len(soft_trace.to_json().encode())
    print(f"  trace JSON: greedy {greedy_json / n / 1024:.1f} KiB per step, "
          f"soft {soft_json / len(soft_trace.steps) / 1024:.1f} KiB per step (top-{config.top_n} candidates; "
          f"the full distribution would be {f.vocab_size * 4 / 1024:.0f} KiB per step in float32)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=24)
    args = parser.parse_args()
    print(f"load: {open('/proc/loadavg').read().strip()}")
    for key in PROMPTS:
        measure(key, args.tokens)
    print(f"load: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
