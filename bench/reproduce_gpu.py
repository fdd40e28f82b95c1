"""Distinct greedy completions of one prompt on a GPU, batched with others at random batch sizes up to 64.

    .venv/bin/python -m bench.reproduce_gpu [--model random|bundled] [--requests 256] [--tokens 32]
                                            [--dtypes float16,bfloat16] [--fill same|padded] [--budget-s 240]
    .venv/bin/python -m bench.reproduce_gpu --device cpu --size small --requests 40 --tokens 8    # a CPU try

The prompt ("the needle") is decoded greedily inside batches whose size is drawn from 1, 2, 4, ..., 64, in a random
number of rows of each batch (each row a request), the other rows random other prompts. Every needle row's tokens
are one completion; per precision the script prints how many distinct completions came back over all requests,
how often each, per batch size, and where the first ones part. No network: the model is a randomly initialised
Llama of about 1B parameters (random weights compress the top-2 margins, so they overstate how often a trained
model flips), or the bundled SmolLM2 from its local cache. It stops drawing new batches after --budget-s seconds,
so one call stays within five minutes, and says how many requests it reached.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter

import torch

from engine.model import LoadedModel
from engine.reproduce.batches import Batch
from engine.reproduce.invariant import batch_invariant
from engine.reproduce.runs import BatchStepper

SIZES = (1, 2, 4, 8, 16, 32, 64)
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def load(kind: str, device: str, dtype: torch.dtype, size: str = "1b"):
    """(LoadedModel, the needle's ids, the vocabulary to draw filler ids from)."""
    if kind == "bundled":
        from engine import load_model

        lm = load_model(None, device=device, dtype=str(dtype).replace("torch.", ""))
        text = lm.tokenizer.apply_chat_template([{"role": "user", "content": "Tell me about Richard Feynman."}],
                                                add_generation_prompt=True, tokenize=False)
        return lm, list(lm.tokenizer(text, add_special_tokens=False)["input_ids"]), lm.facts.vocab_size
    from bench.bench_gpu import random_llama

    lm = random_llama(size, device, dtype)
    return lm, random.Random(1).choices(range(3, 32000), k=24), 32000


def batch_for(needle: list, size: int, needles: set, fill: str, vocab: int, rng: random.Random) -> Batch:
    rows = []
    for i in range(size):
        if i in needles:
            rows.append(list(needle))
        else:
            length = len(needle) if fill == "same" else max(1, len(needle) + rng.randint(-8, 16))
            rows.append(rng.choices(range(3, vocab), k=length))
    width = max(len(r) for r in rows)
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return Batch(ids, mask, min(needles))


def decode_batch(lm: LoadedModel, batch: Batch, tokens: int) -> torch.Tensor:
    """[B, tokens] greedy tokens of every row."""
    stepper = BatchStepper(lm, batch)
    logits = stepper.prefill(batch, 0)
    out = []
    for _ in range(tokens):
        chosen = logits.argmax(-1)
        out.append(chosen)
        logits = stepper.forward(chosen[:, None], torch.ones(batch.size, 1, dtype=torch.long))[:, -1]
    return torch.stack(out, dim=1).cpu()


def first_part(a: tuple, b: tuple) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("random", "bundled"), default="random")
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--fill", choices=("same", "padded"), default="same")
    parser.add_argument("--invariant", action="store_true", help="every linear layer row by row (slow)")
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", choices=("1b", "small"), default="1b", help="the random model's size")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here; run it where PyTorch sees a GPU (or pass --device cpu to try it small)")
        return 2
    start = time.perf_counter()
    budget = args.budget_s / len(args.dtypes.split(","))
    for name in args.dtypes.split(","):
        began = time.perf_counter()
        lm, needle, vocab = load(args.model, args.device, DTYPES[name], args.size)
        rng = random.Random(0)
        completions, by_size = [], {}
        with torch.inference_mode(), batch_invariant(args.invariant):
            decode_batch(lm, batch_for(needle, 2, {0}, args.fill, vocab, rng), 2)          # warm up
            while len(completions) < args.requests and time.perf_counter() - began < budget:
                size = rng.choice(SIZES)
                needles = set(rng.sample(range(size), rng.randint(1, max(1, size // 2))))
                rows = decode_batch(lm, batch_for(needle, size, needles, args.fill, vocab, rng), args.tokens)
                for i in sorted(needles):
                    completion = tuple(rows[i].tolist())
                    completions.append(completion)
                    by_size.setdefault(size, Counter())[completion] += 1
        counts = Counter(completions)
        top = counts.most_common(1)[0][0]
        parts = sorted(first_part(top, c) for c in counts if c != top)
        print(f"{lm.name} {name} on {args.device}, fill {args.fill}, {'invariant' if args.invariant else 'normal'} "
              f"mode: {len(completions)} requests of {args.tokens} tokens in {time.perf_counter() - began:.0f} s "
              f"-> {len(counts)} distinct completion(s), counts {[n for _, n in counts.most_common(8)]}")
        print(f"  first divergence from the most common (token index from 0): {parts[:12] or 'none'}")
        for size in sorted(by_size):
            seen = by_size[size]
            print(f"  batch size {size:>2}: {sum(seen.values()):>4} requests, {len(seen)} distinct, "
                  f"{seen[top]} equal to the most common")
        del lm
        if args.device == "cuda":
            torch.cuda.empty_cache()
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
