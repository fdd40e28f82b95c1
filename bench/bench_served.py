"""A served model against the same model run here: llama.cpp's server (llama-cpp-python) on the bundled
SmolLM2 GGUF over loopback, beside transformers on the same weights in this process.

    .venv/bin/python -m bench.bench_served [--rounds 10] [--tokens 24]

1. one step: one completion request (max_tokens 1, top-20 logprobs) vs one local forward pass with the KV
   cache of the prompt (what a local step costs), measured also before the server starts: on a small
   machine the server's threads compete with the local model for the same cores;
2. a greedy decode of --tokens tokens: served_decode (one request) vs the local decode;
3. a beam search, 4 beams x 8 tokens: served (one request per beam per step) vs the local BeamSearch.
Medians over --rounds, interleaved; the machine's load beside each figure. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from engine import DecodeConfig, decode, load_model
from engine.served import Server
from engine.served.decode import served_decode
from tests.served.served_helpers import running_llama_server

PROMPT = "The capital of France is"


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def say(figure: str) -> None:
    print(f"{figure:<78} [{load()}]", flush=True)


def median_pair(rounds: int, ours, reference) -> tuple[float, float]:
    a, b = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        reference()
        b.append(time.perf_counter() - t)
    return statistics.median(a), statistics.median(b)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=24)
    args = parser.parse_args()
    lm = load_model()
    ids = torch.tensor([lm.tokenizer(PROMPT)["input_ids"]])
    with torch.inference_mode():
        prefill = lm.model(input_ids=ids, use_cache=True)
    token = prefill.logits[:, -1].argmax(-1, keepdim=True)

    def local_step():
        past = prefill.past_key_values
        with torch.inference_mode():
            lm.model(input_ids=token, past_key_values=past, use_cache=True, logits_to_keep=1)
        past.crop(-1)

    alone = statistics.median(_timed(local_step) for _ in range(args.rounds))
    say(f"one local forward with no server running: {alone * 1e3:.1f} ms")
    with running_llama_server() as url:
        server = Server.connect(url)
        served_step = lambda: server.complete(PROMPT, max_tokens=1, logprobs=20)   # noqa: E731
        served_step()                                                              # warm the prompt cache
        s, local = median_pair(args.rounds, served_step, local_step)
        say(f"one step: served {s * 1e3:.1f} ms, local forward {local * 1e3:.1f} ms, ratio {s / local:.2f}")

        greedy = DecodeConfig(max_new_tokens=args.tokens)
        s, local = median_pair(max(args.rounds // 3, 1), lambda: served_decode(server, PROMPT, greedy),
                               lambda: decode(lm, PROMPT, greedy))
        say(f"greedy x {args.tokens}: served {s:.2f} s, local {local:.2f} s, ratio {s / local:.2f}")

        beam = DecodeConfig(strategy="beam", num_beams=4, max_new_tokens=8)
        s, local = median_pair(max(args.rounds // 5, 1), lambda: served_decode(server, PROMPT, beam),
                               lambda: decode(lm, PROMPT, beam))
        say(f"beam 4 x 8: served {s:.2f} s ({4 * 8} requests at most), local {local:.2f} s, ratio {s / local:.2f}")


if __name__ == "__main__":
    main()
