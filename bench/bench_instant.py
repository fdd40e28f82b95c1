"""What a click costs, engine side, as ratios against references measured in the same run.

    .venv/bin/python -m bench.bench_instant [--rounds 3] [--tokens 24]

1. Compare's lanes (greedy, top-k, top-p, temperature, soft, gumbel) as one batch, and one by one,
   each divided by one greedy lane of the same length decoded alone;
2. beam search 4 x N, first time, divided by model.generate(num_beams=4) for the same;
3. the same search asked again from the shared decode service (any page or session);
4. a branch at step N/2: forked from the parent's state, and replayed from the start,
   divided by one forward pass.
Rounds interleave ours and the reference, the median is printed, and the machine's load
(1-minute average, and the number of cores) stands beside each figure.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from engine import DecodeConfig, decode, load_model
from engine.decoding.decoder import Decoder
from engine.decoding.lanes import decode_lanes
from engine.service import DecodeService

PROMPT = "The best way to learn a new language is"
LANES = [dict(strategy="greedy"), dict(strategy="sample", top_k=40), dict(strategy="sample", top_p=0.9),
         dict(strategy="sample", temperature=0.7), dict(strategy="soft"), dict(strategy="gumbel", tau=0.5)]


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def median_of(rounds: int, fn) -> float:
    return statistics.median(timed(fn)[0] for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=24)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    lm = load_model()
    lm.eos_token_ids = ()     # every lane runs its full length, so the ratios compare equal work
    n = args.tokens
    configs = [DecodeConfig(max_new_tokens=n, seed=1, **lane) for lane in LANES]
    greedy = DecodeConfig(max_new_tokens=n)
    decode(lm, PROMPT, greedy)                                          # warm-up

    one, batched, serial = [], [], []
    for _ in range(args.rounds):
        one.append(timed(lambda: decode(lm, PROMPT, greedy))[0])
        batched.append(timed(lambda: decode_lanes(lm, PROMPT, configs))[0])
        serial.append(timed(lambda: [decode(lm, PROMPT, c) for c in configs])[0])
    one_s, batched_s, serial_s = (statistics.median(x) for x in (one, batched, serial))
    print(f"one greedy lane x {n}: {one_s:.2f} s  ({load()})")
    print(f"Compare, {len(configs)} lanes x {n}, one batch:  {batched_s:.2f} s   ratio {batched_s / one_s:.2f} "
          f"(goal <= 2.5)  ({load()})")
    print(f"Compare, {len(configs)} lanes x {n}, one by one: {serial_s:.2f} s   "
          f"ratio {serial_s / one_s:.2f}  ({load()})")

    beam = DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=n)
    ids = torch.tensor([lm.tokenizer(PROMPT)["input_ids"]])
    ours, ref = [], []
    for _ in range(args.rounds):
        ours.append(timed(lambda: decode(lm, PROMPT, beam))[0])
        ref.append(timed(lambda: lm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                                   num_beams=4, max_new_tokens=n, min_new_tokens=n,
                                                   pad_token_id=2))[0])
    ours_s, ref_s = statistics.median(ours), statistics.median(ref)
    print(f"Beam tree 4 x {n}, first time: {ours_s:.2f} s   generate(num_beams=4): {ref_s:.2f} s   "
          f"ratio {ours_s / ref_s:.2f} (goal <= 1.2)  ({load()})")

    service = DecodeService()
    service.decode(lm, PROMPT, beam)
    again = median_of(max(args.rounds, 5), lambda: service.decode(lm, PROMPT, beam))
    print(f"the same search again, from the shared service: {again * 1000:.3f} ms (goal <= 100 ms)  ({load()})")

    step_cost = []
    fork, replay = [], []
    for _ in range(args.rounds):
        parent = Decoder(lm, PROMPT, greedy)
        for _ in range(n):
            parent.step()
        at = n // 2
        other = parent.steps[at].candidates[1].token_id
        fork.append(timed(lambda parent=parent, at=at, other=other: parent.fork(at, other).step())[0])
        fresh = Decoder(lm, PROMPT, greedy, forced={at: other})
        replay.append(timed(lambda fresh=fresh, at=at: [fresh.step() for _ in range(at + 1)])[0])
        step_cost.append(statistics.median(s.seconds for s in parent.steps[1:]))
    step_s = statistics.median(step_cost)
    print(f"branch at step {n // 2 + 1}: forked {statistics.median(fork) * 1000:.0f} ms, replayed "
          f"{statistics.median(replay) * 1000:.0f} ms; one forward step {step_s * 1000:.0f} ms; "
          f"ratios {statistics.median(fork) / step_s:.1f} and {statistics.median(replay) / step_s:.1f}  ({load()})")


if __name__ == "__main__":
    main()
