"""Greedy speculative decoding on both bundled models gives plain greedy's ids and transformers' own assisted
generation's ids with the same settings (assistant_early_exit, prompt_lookup_num_tokens, assistant_model)."""
from __future__ import annotations

import torch

from engine import DecodeConfig, decode

N, K = 8, 3
CASES = {"smollm2": ("The capital of France is Paris. The capital of Italy is", 20),
         "gemma": ("中国的首都是北京。日本的首都是", 12)}


def generate_ids(lm, prompt_ids, **kwargs):
    ids = torch.tensor([prompt_ids], device=lm.device)
    out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N,
                            eos_token_id=list(lm.eos_token_ids),
                            pad_token_id=lm.tokenizer.pad_token_id or lm.eos_token_ids[0], **kwargs)
    new = out[0, len(prompt_ids):].tolist()
    ends = [i for i, t in enumerate(new) if t in lm.eos_token_ids]
    return new[:ends[0] + 1] if ends else new


def check_model(lm, prompt, layer):
    plain = decode(lm, prompt, DecodeConfig(max_new_tokens=N))
    prompt_ids = plain.prompt_token_ids
    assert plain.best.token_ids == generate_ids(lm, prompt_ids)
    # the model drafting for itself is the only second model that shares its vocabulary here: p == q
    cases = {f"early-exit:{layer}": {"assistant_early_exit": layer},
             "prompt-lookup:2": {"prompt_lookup_num_tokens": K},
             "model:itself": {"assistant_model": lm.model, "num_assistant_tokens": K,
                              "num_assistant_tokens_schedule": "constant"}}
    for spec, kwargs in cases.items():
        trace = decode(lm, prompt, DecodeConfig(strategy="speculative", draft=spec, draft_tokens=K, max_new_tokens=N),
                       draft_lm=lm)
        assert trace.best.token_ids == plain.best.token_ids == generate_ids(lm, prompt_ids, **kwargs), spec
        assert trace.timings["target_passes"] == len(trace.rounds)
    return trace


def test_smollm2(bundled):
    prompt, layer = CASES["smollm2"]
    trace = check_model(bundled, prompt, layer)
    assert all(r.next_kind == "bonus" for r in trace.rounds[:-1])      # drafting for itself, every draft is kept


def test_gemma(gemma):
    prompt, layer = CASES["gemma"]
    check_model(gemma, prompt, layer)
