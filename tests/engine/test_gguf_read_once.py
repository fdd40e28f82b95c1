"""The first load's shortcut (engine.model.bundled.read_once): while de-quantising, a GGUF file's header is read
once and gguf's tensor-name map built once per architecture; outside it, gguf is as it was.

Reference: gguf's own reader and name map, on a small GGUF file written here with gguf's writer. (That the
bundled SmolLM2 de-quantised under read_once has the very same 273 tensors and tokenizer as without it was
checked by hand once: it is two 12-24 s loads, too dear for every run.)"""
from __future__ import annotations

import gguf
import numpy as np

from engine.model.bundled import read_once


def small_gguf(path) -> None:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_file_is_read_once_and_the_same_as_gguf_reads_it(tmp_path):
    path = tmp_path / "small.gguf"
    small_gguf(path)
    real = gguf.GGUFReader
    plain = real(str(path))
    with read_once():
        first = gguf.GGUFReader(str(path))
        again = gguf.GGUFReader(tmp_path / "." / "small.gguf")        # the same file by another spelling
        assert again is first
        assert list(first.fields) == list(plain.fields)
        assert [t.name for t in first.tensors] == [t.name for t in plain.tensors] == ["token_embd.weight"]
        assert np.array_equal(first.tensors[0].data, plain.tensors[0].data)
    assert gguf.GGUFReader is real and gguf.GGUFReader(str(path)) is not first      # gguf's own reader again


def test_the_name_map_is_built_once_and_maps_as_gguf_does():
    arch = gguf.MODEL_ARCH.LLAMA
    plain = gguf.get_tensor_name_map(arch, 2)
    with read_once():
        once = gguf.get_tensor_name_map(arch, 2)
        assert gguf.get_tensor_name_map(arch, 2) is once
    for name in ("model.embed_tokens", "model.layers.1.self_attn.q_proj", "model.norm", "lm_head"):
        assert once.get_name(name) == plain.get_name(name) is not None
    assert gguf.get_tensor_name_map(arch, 2) is not once               # gguf's own function again
