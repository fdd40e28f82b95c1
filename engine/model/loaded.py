"""A loaded model: the model and tokenizer, the facts the pages show, and how its tokens read as text."""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from typing import Callable

import torch

from .turns import take_turns

Progress = Callable[[float, str], None]   # (fraction 0..1, what is happening)


@dataclass(frozen=True)
class ModelFacts:
    name: str
    parameters: int
    vocab_size: int
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    dtype_bytes: int
    context_length: int
    has_chat_template: bool
    architecture: str
    device: str = "cpu"      # where the weights live: "cpu", "cuda:0", or a split such as "cuda:0, cuda:1, cpu"

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x KV heads x head dim x bytes per value."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


@dataclass
class LoadedModel:
    """The model (eval mode, never mutated after load), its tokenizer, and facts the UI shows."""
    model: torch.nn.Module
    tokenizer: object
    facts: ModelFacts
    token_texts: list = field(repr=False, default_factory=list)   # display text per token id
    eos_token_ids: tuple = ()
    load_seconds: float = 0.0
    from_cache: bool = False
    cache_rebuilt: str = ""          # why the cached copy was rebuilt on this load ("" when it was not)
    _embedding_norms: torch.Tensor | None = field(default=None, repr=False)
    _unit_embeddings_half: torch.Tensor | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.facts.name

    def tokenize(self, text: str) -> list:
        """The token ids of `text` alone, no special tokens added (how DRY's split breakers are matched)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    _embeddings_cpu: torch.Tensor | None = field(default=None, repr=False)

    @property
    def device(self) -> torch.device:
        """Where the inputs go: the device of the input embedding layer."""
        return self.model.get_input_embeddings().weight.device

    @property
    def embeddings(self) -> torch.Tensor:
        """E: [vocab, hidden], the input embedding matrix as stored, in float32 on the CPU, where the
        analyses (p^T E, nearest tokens, projections) run. It is the weight itself for a float32 CPU
        model, and a copy made once for a model on a GPU or in half precision."""
        weight = self.model.get_input_embeddings().weight
        if weight.device.type == "cpu" and weight.dtype == torch.float32:
            return weight
        if self._embeddings_cpu is None:
            self._embeddings_cpu = weight.detach().to("cpu", torch.float32)
        return self._embeddings_cpu

    @property
    def embed_scale(self) -> torch.Tensor | None:
        """The factor the embedding layer multiplies each looked-up row by (Gemma: sqrt(hidden)), or None."""
        scale = getattr(self.model.get_input_embeddings(), "embed_scale", None)
        return None if scale is None else torch.as_tensor(scale)

    def model_inputs(self, kind: str, value: torch.Tensor) -> torch.Tensor:
        """`inputs_embeds` for the model, from token ids ("ids", [rows, n]) or from vectors in the space of
        E's rows ("embeds", [rows, n, hidden], such as p^T E). Vectors get what the embedding layer does
        after its lookup (Gemma's sqrt(hidden) scaling, in the weights' dtype), so a one-hot p gives
        exactly the embedding of its token: the same logits as feeding the id."""
        layer = self.model.get_input_embeddings()
        if kind == "ids":
            return layer(value.to(layer.weight.device))
        vector = value.to(layer.weight.device, layer.weight.dtype)
        scale = self.embed_scale
        return vector if scale is None else vector * scale.to(layer.weight.device, layer.weight.dtype)

    @property
    def embedding_norms(self) -> torch.Tensor:
        if self._embedding_norms is None:
            self._embedding_norms = self.embeddings.detach().float().norm(dim=-1).clamp_min(1e-12)
        return self._embedding_norms

    @property
    def unit_embeddings_half(self) -> torch.Tensor:
        """E's rows scaled to length 1, in float16: the first pass of the nearest-token search reads
        half the bytes of E (a soft step searches all of the vocabulary once)."""
        if self._unit_embeddings_half is None:
            E = self.embeddings.detach().float()
            self._unit_embeddings_half = (E / self.embedding_norms[:, None]).half()
        return self._unit_embeddings_half

    @classmethod
    def from_parts(cls, model, tokenizer, name: str) -> "LoadedModel":
        """Wrap an already-built model (tests build tiny random ones); its forward passes take turns."""
        model.eval()
        take_turns(model)
        for p in model.parameters():
            p.requires_grad_(False)
        facts = model_facts(model, tokenizer, name)
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        if eos is None:
            eos = tokenizer.eos_token_id
        eos_ids = tuple(eos) if isinstance(eos, list | tuple) else (() if eos is None else (int(eos),))
        return cls(model=model, tokenizer=tokenizer, facts=facts,
                   token_texts=token_display_texts(tokenizer, facts.vocab_size), eos_token_ids=eos_ids)


# ---- facts -------------------------------------------------------------------
def model_facts(model, tokenizer, name: str) -> ModelFacts:
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    heads = getattr(text_cfg, "num_attention_heads", None) or getattr(text_cfg, "n_head", 1)
    hidden = getattr(text_cfg, "hidden_size", None) or getattr(text_cfg, "n_embd", 0)
    kv_heads = getattr(text_cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(text_cfg, "head_dim", None) or hidden // heads
    layers = getattr(text_cfg, "num_hidden_layers", None) or getattr(text_cfg, "n_layer", 0)
    context = (getattr(text_cfg, "max_position_embeddings", None) or getattr(text_cfg, "n_positions", None)
               or getattr(tokenizer, "model_max_length", 2048))
    dtype = next(model.parameters()).dtype
    return ModelFacts(
        name=name,
        parameters=sum(p.numel() for p in model.parameters()),
        vocab_size=model.get_input_embeddings().weight.shape[0],
        layers=int(layers), hidden_size=int(hidden), heads=int(heads), kv_heads=int(kv_heads),
        head_dim=int(head_dim), dtype=str(dtype).replace("torch.", ""),
        dtype_bytes=torch.empty((), dtype=dtype).element_size(),
        context_length=int(context),
        has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
        architecture=(cfg.architectures or [type(model).__name__])[0],
        device=model_device(model),
    )


def model_device(model) -> str:
    """Where the weights live, as PyTorch names it; every device of a model split by `device_map`."""
    placed = getattr(model, "hf_device_map", None)
    if placed and len(set(placed.values())) > 1:
        names = []
        for where in placed.values():
            name = f"cuda:{where}" if isinstance(where, int) else str(where)
            if name not in names:
                names.append(name)
        return ", ".join(names)
    return str(next(model.parameters()).device)


# ---- token display -----------------------------------------------------------
def _byte_decoder() -> dict:
    """Inverse of GPT-2's bytes_to_unicode: byte-level BPE stores each byte as one printable char."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _bytes_as_hex(err: UnicodeDecodeError):
    return "".join(f"<0x{b:02X}>" for b in err.object[err.start:err.end]), err.end


codecs.register_error("decodescope-hex", _bytes_as_hex)


def bytes_display(raw: bytes) -> str:
    """Whole UTF-8 shows as text; stray bytes as <0xE4><0xBD>..., never a replacement char."""
    return raw.decode("utf-8", errors="decodescope-hex")


def token_display_texts(tokenizer, vocab_size: int) -> list:
    """Display text for every token id, computed once per model."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(min(vocab_size, len(tokenizer)))))
    special = set(getattr(tokenizer, "all_special_tokens", []))
    added = set(getattr(tokenizer, "get_added_vocab", lambda: {})().keys())
    decoder = _byte_decoder()
    byte_level = _looks_byte_level(tokenizer, tokens, decoder)
    texts = []
    for i, tok in enumerate(tokens):
        if tok is None:
            texts.append(f"<id {i}>")
        elif tok in special or tok in added:
            texts.append(tok)
        elif byte_level and all(ch in decoder for ch in tok):
            texts.append(bytes_display(bytes(decoder[ch] for ch in tok)))
        elif _BYTE_TOKEN.fullmatch(tok):
            texts.append(bytes_display(bytes([int(_BYTE_TOKEN.fullmatch(tok).group(1), 16)])))
        else:
            text = tokenizer.decode([i])
            texts.append(text if "\ufffd" not in text else tok.replace("▁", " "))
    texts.extend(f"<id {i}>" for i in range(len(texts), vocab_size))
    return texts


def _looks_byte_level(tokenizer, tokens, decoder) -> bool:
    """Byte-level BPE vocabularies spell a leading space as 'Ġ'."""
    sample = [t for t in tokens[:5000] if t]
    return (any(t.startswith("Ġ") for t in sample)
            and sum(all(c in decoder for c in t) for t in sample) > 0.9 * len(sample))


