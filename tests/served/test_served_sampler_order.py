"""llama.cpp's sampler order on a real llama.cpp server (llama-cpp-python, serving the bundled SmolLM2): at a
low temperature with min-p, llama.cpp applies min-p before the temperature, so it keeps tokens that
transformers' order (temperature first) drops. The server's own sampled tokens must all lie in the set
engine.samplers.order computes from the server's raw top-N, and some must lie outside transformers' set.

The prompt is one whose next token the model is unsure of: measured here, " place" leads and six tokens lie
between 0.5 and 0.71 of its probability, the band where the two orders part at min-p 0.5 and temperature 0.5
(llama.cpp keeps a ratio r >= 0.5; transformers keeps r^2 >= 0.5 x 1, i.e. r >= 0.71)."""
from __future__ import annotations

import math

import pytest
import torch

from engine.config import DecodeConfig
from engine.samplers.order import kept, llama_cpp_processors
from engine.served import Server
from engine.samplers.shaping import build_processors

PROMPT = "Paris is a"
CONFIG = DecodeConfig(strategy="sample", temperature=0.5, min_p=0.5, top_k=0, top_p=1.0)
LISTED = 12
SEEDS = range(6)


@pytest.fixture(scope="module")
def samples(llama_server):
    """One sampled token per seed, each with the server's raw top-N at that position."""
    server = Server.connect(llama_server)
    assert server.numbers == "raw"              # the kept sets below are computed from raw numbers
    out = []
    for seed in SEEDS:
        _, [position], _ = server.complete(PROMPT, max_tokens=1, logprobs=LISTED, temperature=CONFIG.temperature,
                                           top_k=CONFIG.top_k, top_p=CONFIG.top_p, min_p=CONFIG.min_p, seed=seed)
        out.append(position)
    return out


def kept_texts(position, processors) -> set:
    texts = [text for text, _ in position.top]
    logprobs = torch.tensor([lp for _, lp in position.top], dtype=torch.float32)
    mask = kept(processors, torch.zeros((1, 0), dtype=torch.long), logprobs)
    return {text for text, keep in zip(texts, mask.tolist()) if keep}


def test_the_server_samples_from_the_llama_cpp_kept_set(samples):
    outside_transformers = []
    for seed, position in zip(SEEDS, samples):
        # min-p looks at ratios to the top token, so the top-N decides every kept token once the N-th one
        # falls below min_p x the top: the tokens not listed are less likely still
        top, last = position.top[0][1], position.top[-1][1]
        assert last < top + math.log(CONFIG.min_p), f"seed {seed}: the top {LISTED} do not cover the kept set"
        ours = kept_texts(position, llama_cpp_processors(CONFIG))
        theirs = kept_texts(position, build_processors(CONFIG))
        assert theirs < ours                       # transformers' order keeps fewer at a temperature below 1
        assert position.text in ours, (seed, position.text, sorted(ours))
        if position.text not in theirs:
            outside_transformers.append(position.text)
    assert outside_transformers, "every sampled token was one transformers' order keeps too"
