"""The bundled Gemma 3 270M: few tests (its first load takes minutes), each against transformers itself."""
from __future__ import annotations

import unicodedata

import torch

from engine import DecodeConfig, decode
from engine.decoding.decoder import Decoder
from generate_reference import generate_ids, strip_generated

ZH = "中国的首都是"


def test_gemma_loads_as_measured_and_continues_chinese_in_chinese_like_generate(gemma):
    f = gemma.facts
    assert (f.architecture, f.vocab_size, f.layers, f.hidden_size) == ("Gemma3ForCausalLM", 262144, 18, 640)
    assert not f.has_chat_template and f.name == "Gemma-3-270M (bundled)"
    trace = decode(gemma, ZH, DecodeConfig(strategy="greedy", max_new_tokens=8))
    out = generate_ids(gemma, trace.prompt_token_ids, do_sample=False, max_new_tokens=8)
    assert trace.best.token_ids == strip_generated(out[0], len(trace.prompt_token_ids), 0, gemma.eos_token_ids)
    han = [ch for ch in trace.best.text if unicodedata.name(ch, "").startswith("CJK UNIFIED IDEOGRAPH")]
    assert len(han) >= 4, trace.best.text


def test_a_one_hot_soft_step_on_gemma_gives_the_logits_of_the_token(gemma):
    """The real model scales embeddings by sqrt(640) = 25.3; a soft input without it reads 25 times too small."""
    assert float(gemma.embed_scale) == torch.tensor(640 ** 0.5).item()
    token = gemma.tokenizer("北京", add_special_tokens=False)["input_ids"][0]
    decoder = Decoder(gemma, ZH, DecodeConfig(strategy="soft", max_new_tokens=2, top_n=20), forced={0: token})
    trace = decoder.run()
    prompt = trace.prompt_token_ids
    with torch.no_grad():
        expected = gemma.model(input_ids=torch.tensor([prompt + [token]])).logits[0, -1].float()
    step = trace.steps[1]
    got = torch.tensor([c.logit for c in step.candidates])
    assert torch.allclose(got, expected[[c.token_id for c in step.candidates]], atol=1e-3)


def test_the_answer_tree_on_gemma_gives_a_plain_forward_pass(gemma):
    """Gemma's sliding-window and global layers: a path's mass in the tree (kept keys and values gathered per
    row) is the sum over a plain forward pass of prompt + path."""
    from engine.answers import TreeSettings, grow_tree
    from engine.tokens import encode_prompt

    ids = encode_prompt(gemma, "法国的首都是", False, 6)
    tree = grow_tree(gemma, ids, TreeSettings(depth=4, budget=24, branch=3, batch=8))
    with torch.inference_mode():
        for node in [n for n in tree.nodes if n.depth >= 2][::4]:
            path = [n.token_id for n in tree.path(node.id)]
            logits = gemma.model(input_ids=torch.tensor([ids + path])).logits[0].double()
            want = sum(torch.log_softmax(logits[len(ids) - 1 + i], -1)[t].item() for i, t in enumerate(path))
            assert abs(node.logprob - want) < 1e-3
