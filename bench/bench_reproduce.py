"""The batch-invariant mode's cost: the same decode in normal and in batch-invariant mode, measured in the same run.

    .venv/bin/python -m bench.bench_reproduce [--model smollm2-135m] [--tokens 16] [--sizes 1,4,8] [--rounds 3]

For each precision and batch size (the prompt's row among same-length fillers): the median wall time of a decode
in normal mode and in batch-invariant mode (every linear layer row by row), alternated round by round so both see
the same load, their ratio, and whether each mode's logits equal the alone run's bit for bit (invariant mode
must). The machine's load (os.getloadavg, 1 minute) is printed beside each figure.
"""
from __future__ import annotations

import argparse
import os
import statistics

import torch

from engine import load_model
from engine.reproduce.runs import RunSpec, decode_run
from engine.reproduce.study import prompt_ids_for
from engine.reproduce.settings import StudySettings

PROMPT = "Tell me about Richard Feynman."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--sizes", default="1,4,8")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lm = load_model(args.model)
    ids = prompt_ids_for(lm, PROMPT, StudySettings(max_new_tokens=args.tokens, chat=lm.facts.has_chat_template))
    print(f"{lm.name}, {len(ids)} prompt tokens, {args.tokens} new tokens, {torch.get_num_threads()} threads")
    print(f"{'dtype':<9} {'batch':>5} {'normal':>9} {'invariant':>9} {'ratio':>6} {'normal = alone':>14} "
          f"{'invariant = alone':>17} {'load':>5}")
    for dtype in args.dtypes.split(","):
        alone = {inv: decode_run(lm, ids, RunSpec(dtype=dtype, invariant=inv), args.tokens) for inv in (False, True)}
        for size in (int(x) for x in args.sizes.split(",")):
            times = {False: [], True: []}
            same = {}
            for _ in range(args.rounds):
                for inv in (False, True):
                    run = decode_run(lm, ids, RunSpec(batch_size=size, dtype=dtype, invariant=inv), args.tokens)
                    times[inv].append(run.seconds)
                    same[inv] = torch.equal(run.logits, alone[inv].logits)
            normal, invariant = statistics.median(times[False]), statistics.median(times[True])
            print(f"{dtype:<9} {size:>5} {normal:>8.2f}s {invariant:>8.2f}s {invariant / normal:>6.2f} "
                  f"{'yes' if same[False] else 'no':>14} {'yes' if same[True] else 'NO':>17} "
                  f"{os.getloadavg()[0]:>5.2f}", flush=True)


if __name__ == "__main__":
    main()
