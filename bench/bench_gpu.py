"""The engine on a GPU: a randomly initialised Llama of about 1B parameters, no download.

    .venv/bin/python -m bench.bench_gpu [--device cuda] [--dtype bfloat16] [--tokens 64] [--rounds 3]

Prints, measured in the same run on the same model:
1. greedy tokens equal to model.generate (parity at this size, device and dtype);
2. engine greedy tok/s vs generate tok/s (the engine records the top-20 every step);
3. one soft step (p^T E and the nearest-token search, on the float32 CPU copy of E) vs one greedy step.
`make gpu-check` runs it after the parity tests; `--size small` runs a small model for a CPU try.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from engine import DecodeConfig, decode
from engine.decoding.decoder import Decoder
from engine.model import LoadedModel
from tests.tiny_models import tiny_tokenizer

SIZES = {   # TinyLlama's shape: 1.1 B parameters
    "1b": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
               num_attention_heads=32, num_key_value_heads=4),
    "small": dict(vocab_size=32000, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2),
}
PROMPT = "The capital of France is"


def random_llama(size: str, device: str, dtype: torch.dtype) -> LoadedModel:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**SIZES[size], max_position_embeddings=2048, tie_word_embeddings=False,
                      bos_token_id=0, eos_token_id=None, pad_token_id=0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    lm = LoadedModel.from_parts(model, tiny_tokenizer(), f"random-llama-{size}")
    lm.eos_token_ids = ()            # run every step: a random model may draw any id
    return lm


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: str) -> tuple[float, object]:
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--size", default="1b", choices=sorted(SIZES))
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    t_build, lm = timed(lambda: random_llama(args.size, args.device, dtype), args.device)
    name = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"model: {lm.facts.parameters / 1e9:.2f} B parameters, {lm.facts.dtype} on {lm.facts.device} ({name}); "
          f"built in {t_build:.1f} s; KV {lm.facts.kv_bytes_per_token:,} bytes per token")

    n = args.tokens
    config = DecodeConfig(strategy="greedy", max_new_tokens=n)
    ids = decode(lm, PROMPT, DecodeConfig(strategy="greedy", max_new_tokens=2)).prompt_token_ids   # and a warm-up

    def reference():
        return lm.model.generate(torch.tensor([ids], device=args.device), do_sample=False, max_new_tokens=n,
                                 min_new_tokens=n, attention_mask=torch.ones(1, len(ids), dtype=torch.long,
                                                                              device=args.device))

    ours_s, theirs_s = [], []
    for _ in range(args.rounds):      # interleaved, median reported
        s, trace = timed(lambda: decode(lm, PROMPT, config), args.device)
        ours_s.append(s)
        s, out = timed(reference, args.device)
        theirs_s.append(s)
    same = trace.best.token_ids == out[0, len(ids):].tolist()
    print(f"parity: greedy tokens {'equal to' if same else 'DIFFERENT from'} generate over {n} tokens")
    ours, theirs = n / statistics.median(ours_s), n / statistics.median(theirs_s)
    print(f"greedy: engine {ours:.1f} tok/s, generate {theirs:.1f} tok/s, ratio {ours / theirs:.2f}")

    def steps(strategy: str) -> float:
        decoder = Decoder(lm, PROMPT, DecodeConfig(strategy=strategy, max_new_tokens=9))
        decoder.step()                 # the prefill is not a step of interest
        times = []
        for _ in range(8):
            s, _ = timed(decoder.step, args.device)
            times.append(s)
        return statistics.median(times)

    soft, greedy = steps("soft"), steps("greedy")
    print(f"one step: soft {soft * 1000:.1f} ms, greedy {greedy * 1000:.1f} ms, ratio {soft / greedy:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
