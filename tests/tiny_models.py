"""Tiny randomly initialised models built in-process (no download), for engine and UI tests.

The tiny tokenizer is a byte-level BPE trained in-process on a few sentences, so token
texts include byte pieces and special tokens like the real thing.
"""
from __future__ import annotations

from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent

CORPUS = [
    "The capital of France is Paris. The capital of Italy is Rome.",
    "A language model predicts the next token from the tokens before it.",
    "Greedy decoding picks the most likely token; sampling draws one at random.",
    "Beam search keeps several hypotheses and scores them by their log probability.",
    "你好，世界。 emoji 😀 and <b>bold</b> &amp; $x$ tags.",
] * 20


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


_TOKENIZER = None
SHARPEN = 6.0


def tiny_tokenizer():
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = build_tokenizer()
    return _TOKENIZER


def tiny_llama(seed: int = 0, eos_token_id: int = 0, vocab_size: int | None = None):
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.model import LoadedModel

    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size or len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=True, eos_token_id=eos_token_id, bos_token_id=0, pad_token_id=0)
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = 0
    with torch.no_grad():   # sharpen the logits so distributions have structure, like a trained model's
        model.model.norm.weight.mul_(SHARPEN)
    return LoadedModel.from_parts(model, tok, "tiny-llama")


def tiny_gpt2(seed: int = 0, eos_token_id: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    from engine.model import LoadedModel

    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=256,
                     eos_token_id=eos_token_id, bos_token_id=0, pad_token_id=0)
    model = GPT2LMHeadModel(cfg)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        model.transformer.ln_f.weight.mul_(SHARPEN)
    return LoadedModel.from_parts(model, tok, "tiny-gpt2")




def tiny_gemma3(seed: int = 0, eos_token_id: int = 0, hidden_size: int = 64):
    """A Gemma 3 text model: its embedding layer multiplies every row by sqrt(hidden_size)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from engine.model import LoadedModel

    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    cfg = Gemma3TextConfig(vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                           sliding_window=16, eos_token_id=eos_token_id, bos_token_id=0, pad_token_id=0)
    model = Gemma3ForCausalLM(cfg)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        model.model.norm.weight.add_(SHARPEN)   # Gemma's RMSNorm scales by (1 + weight)
    return LoadedModel.from_parts(model, tok, "tiny-gemma3")


TINY_BUILDERS = {"llama": tiny_llama, "gpt2": tiny_gpt2, "gemma3": tiny_gemma3}
