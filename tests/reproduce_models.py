"""Small random models for the reproducibility tests: the tiny Llama and GPT-2 of tiny_models.py, and a wider Llama
(hidden 256) whose bfloat16 logits move enough between a batch and the alone run for argmax flips to happen."""
from __future__ import annotations

import torch

from tiny_models import SHARPEN, tiny_tokenizer


def wide_llama(seed: int = 1, hidden: int = 256):
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.model import LoadedModel

    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=False, eos_token_id=0, bos_token_id=0, pad_token_id=0)
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = 0
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        model.model.norm.weight.mul_(SHARPEN)
    return LoadedModel.from_parts(model, tok, "wide-llama")


def near_tied(lm, eps: float, seed: int = 0):
    """`lm` with every odd row of its output layer a copy of the even row before it plus eps of noise: the top two
    tokens are then a near-tied pair at every step (float32 flips happen with eps about 3e-8)."""
    head = lm.model.get_output_embeddings()
    weight = head.weight.detach().clone()
    generator = torch.Generator().manual_seed(seed)
    odd = weight[1::2].shape[0]
    weight[1::2] = weight[0::2][:odd] + eps * torch.randn(weight[1::2].shape, generator=generator)
    head.weight = torch.nn.Parameter(weight, requires_grad=False)       # unties it from the input embeddings
    return lm
