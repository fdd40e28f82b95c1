"""The engine-specific stages on a real llama.cpp server (llama-cpp-python 0.3, serving the bundled SmolLM2): the
token the server samples must lie in the set our llama.cpp chain keeps, computed from the server's raw top-N
(as test_served_sampler_order does for min-p). What this server takes of them, read from its source
(llama_cpp/server/types.py `CreateCompletionRequest`, llama_cpp/llama.py `Llama._init_sampler`): mirostat v1
and v2 (`mirostat_mode`, τ, η; without llama.cpp's temperature before it, the same at temperature 1);
presence and frequency penalties are accepted but change nothing (its sampler is never shown the tokens, so
its penalty window stays empty); typical-p, DRY, top-nσ, XTC, dynamic temperature and a sampler list are not
in its request at all. The last two tests hold the server to that, so a release that changes it is noticed."""
from __future__ import annotations

import math

import pytest
import torch

from engine.config import DecodeConfig
from engine.samplers.order import kept
from engine.served import Server
from engine.samplers.shaping import build_processors

PROMPT = "Paris is a"          # an unsure next token: " place" leads with p = 0.021, many follow closely
LISTED = 20
SEEDS = range(6)
REST = 4096                    # stand-ins for the unlisted tokens, sharing the mass the top-N leaves


@pytest.fixture(scope="module")
def server(llama_server):
    server = Server.connect(llama_server)
    assert server.kind == "llama-cpp-python" and server.numbers == "raw"
    return server


def sample(server, seed: int, prompt: str = PROMPT, **samplers):
    _, [position], _ = server.complete(prompt, max_tokens=1, logprobs=LISTED, temperature=1.0, top_k=0, top_p=1.0,
                                       min_p=0.0, seed=seed, samplers=samplers)
    return position


def full_logprobs(position) -> torch.Tensor:
    """The listed raw log-probabilities, then REST equal tokens holding the mass left: softmax over it gives each
    listed token its own probability (the chain's stages see the whole distribution, as the server's do)."""
    listed = torch.tensor([lp for _, lp in position.top], dtype=torch.float64)
    rest = max(1.0 - float(listed.exp().sum()), 1e-12)
    return torch.cat([listed, torch.full((REST,), math.log(rest / REST), dtype=torch.float64)]).float()


@pytest.mark.parametrize("version, tau", [(2, 3.5)])
def test_the_server_samples_inside_our_mirostat_cut(server, version, tau):
    """μ starts at 2τ = 7 bits: at the first token mirostat v2 keeps what is at most 7 bits surprising
    (p >= 1/128). (v1 fits a Zipf law to the 100 likeliest tokens, more than the server lists: not checked.)"""
    config = DecodeConfig(strategy="sample", sampler_order="llama.cpp", mirostat=version, mirostat_tau=tau)
    sampled, sizes = [], []
    for seed in SEEDS:
        position = sample(server, seed, mirostat_mode=version, mirostat_tau=tau, mirostat_eta=0.1)
        ours = kept(build_processors(config), torch.zeros((1, 0), dtype=torch.long), full_logprobs(position))
        texts = [text for text, _ in position.top]
        kept_texts = {text for text, keep in zip(texts, ours[:LISTED].tolist()) if keep}
        assert not bool(ours[LISTED:].any()), "the cut reaches past the listed tokens"
        assert 1 <= len(kept_texts) < LISTED, kept_texts             # it cuts, and the top-N covers what it keeps
        assert position.text in kept_texts, (seed, position.text, sorted(kept_texts))
        sampled.append(position.text)
        sizes.append(len(kept_texts))
    if version == 2:
        top = sample(server, 0).top
        by_hand = {text for text, lp in top if -lp / math.log(2) <= 2 * tau}
        assert sizes[0] == len(by_hand)                            # -log2 p <= μ, μ = 2τ


def test_llama_cpp_python_applies_no_penalty(server):
    """Its penalties see an empty window: the same seeds draw the same tokens with the largest penalties it takes
    (2) as with none, on a prompt whose likeliest next tokens are all in the text."""
    prompt = "one two one two one two one two one"
    plain = [sample(server, seed, prompt) for seed in SEEDS]
    assert plain[0].top[0][0] == " two"
    penalised = [sample(server, seed, prompt, presence_penalty=2.0, frequency_penalty=2.0) for seed in SEEDS]
    assert [p.text for p in penalised] == [p.text for p in plain]


def test_llama_cpp_python_ignores_the_stages_its_request_lacks(server):
    """typical-p 0.05, XTC that always fires, DRY: the same seeds draw the same tokens as with none of them."""
    plain = [sample(server, seed).text for seed in SEEDS]
    assert len(set(plain)) > 1
    others = [sample(server, seed, typical_p=0.05, xtc_probability=1.0, xtc_threshold=0.01, dry_multiplier=5.0,
                     top_n_sigma=0.1).text for seed in SEEDS]
    assert others == plain
