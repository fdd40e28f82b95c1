"""Engine speed and memory, as ratios against transformers measured in the same run.

    .venv/bin/python -m bench.bench_engine [--rounds 5] [--tokens 64]

1. decode(greedy), recording the top-20 candidates every step, vs model.generate(do_sample=False)
2. decode(beam, 4 beams) vs model.generate(num_beams=4)
3. one soft step vs one greedy step (the extra p^T E and the nearest-token search)
4. cached load vs first load (the first load runs in a fresh cache folder, in a child process)
5. peak memory after loading, and after a 64-token beam-4 decode (child process, so nothing else counts)
Rounds interleave ours and the reference, and the median is reported.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from engine import DecodeConfig, LoadedModel, decode, load_model
from engine.decoding.decoder import Decoder

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time"


def peak_mb() -> float:
    """This process's peak resident memory. VmHWM belongs to the process's own address space;
    ru_maxrss would also carry the parent's peak across fork and exec, so a child started by a
    parent holding a model would report the parent's size."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def tokens_per_s(lm: LoadedModel, tokens: int, rounds: int):
    ids = torch.tensor([lm.tokenizer(PROMPT)["input_ids"]])
    mask = torch.ones_like(ids)
    ours, ref, ours_beam, ref_beam = [], [], [], []
    for _ in range(rounds):
        s, tr = timed(lambda: decode(lm, PROMPT, DecodeConfig(max_new_tokens=tokens, top_n=20)))
        ours.append(len(tr.best.token_ids) / s)
        s, out = timed(lambda: lm.model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=tokens,
                                                 pad_token_id=2))
        ref.append((out.shape[1] - ids.shape[1]) / s)
        s, tr = timed(lambda: decode(lm, PROMPT, DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=tokens)))
        ours_beam.append(len(tr.steps) / s)
        s, out = timed(lambda: lm.model.generate(ids, attention_mask=mask, do_sample=False, num_beams=4,
                                                 max_new_tokens=tokens, pad_token_id=2))
        ref_beam.append((out.shape[1] - ids.shape[1]) / s)
    return [statistics.median(x) for x in (ours, ref, ours_beam, ref_beam)]


def step_seconds(lm: LoadedModel, strategy: str, steps: int = 32) -> float:
    dec = Decoder(lm, PROMPT, DecodeConfig(strategy=strategy, max_new_tokens=steps + 1))
    dec.step()                      # prefill is not a step of interest
    times = []
    while not dec.finished:
        s, _ = timed(dec.step)
        times.append(s)
    return statistics.median(times)


def child_memory() -> None:
    lm = load_model()
    after_load = peak_mb()      # the weights are mapped from the cache file; the first forward reads them in
    decode(lm, PROMPT, DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=64))
    print(json.dumps({"after_load_mb": after_load, "after_beam_mb": peak_mb()}))


def child_first_load() -> None:
    s, _ = timed(load_model)
    print(json.dumps({"first_load_s": s}))


def run_child(flag: str, env=None) -> dict:
    out = subprocess.run([sys.executable, __file__, flag], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--skip-first-load", action="store_true")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    cached_s, lm = timed(load_model)
    ours, ref, ours_b, ref_b = tokens_per_s(lm, args.tokens, args.rounds)
    soft = [step_seconds(lm, "soft") for _ in range(args.rounds)]
    greedy = [step_seconds(lm, "greedy") for _ in range(args.rounds)]
    soft_s, greedy_s = statistics.median(soft), statistics.median(greedy)
    print(f"greedy decode (top-20 recorded): {ours:6.1f} tok/s   generate: {ref:6.1f} tok/s   "
          f"ratio {ours / ref:.2f} (goal >= 1.0)")
    print(f"beam-4 decode (tree recorded):   {ours_b:6.1f} tok/s   generate: {ref_b:6.1f} tok/s   "
          f"ratio {ours_b / ref_b:.2f} (goal >= 1.0)")
    print(f"soft step {soft_s * 1000:.1f} ms   greedy step {greedy_s * 1000:.1f} ms   "
          f"ratio {soft_s / greedy_s:.2f} (goal <= 1.2)")
    mem = run_child("--child-memory")
    print(f"peak memory: after load {mem['after_load_mb']:.0f} MB, "
          f"after 64-token beam-4 decode {mem['after_beam_mb']:.0f} MB (goal < 1536 MB)")
    if not args.skip_first_load:
        with tempfile.TemporaryDirectory() as tmp:
            first = run_child("--child-first-load", env=dict(os.environ, DECODESCOPE_CACHE=tmp))["first_load_s"]
        print(f"cached load {cached_s:.2f} s   first load {first:.1f} s   ratio {cached_s / first:.3f}")


if __name__ == "__main__":
    if "--child-memory" in sys.argv:
        child_memory()
    elif "--child-first-load" in sys.argv:
        child_first_load()
    else:
        main()
