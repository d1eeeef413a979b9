"""A tiny random BERT embedding model: what the Library's embedding tests load through
llama.cpp instead of a real embedding GGUF (nomic-embed-text is 146 MB).

It is an encoder as the real ones are (`bert.attention.causal` false, its own pooling:
`bert.pooling_type` mean), so it takes the same path through engine/llamacpp/embedding.py as
a downloaded embedding model. Tensor names and shapes follow the vendored llama.cpp's loader
(src/models/bert.cpp); the vocabulary is `tiny_vocab.make_vocab`'s (SPM, as the tiny
generation models read texts). Random weights, float32, about 0.4 MB.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import gguf

from .tiny_vocab import Vocab, make_vocab, write_tokenizer

POOLING_MEAN = 1  # llama.cpp's LLAMA_POOLING_TYPE_MEAN


def write_bert_model(path: str | os.PathLike[str], *, seed: int = 0, vocab: Vocab | None = None, n_embd: int = 32,
                     n_layer: int = 2, n_head: int = 2, n_ctx: int = 512, scale: float = 0.2) -> Path:
    """Write a tiny random BERT encoder with mean pooling to `path` (`seed`: other weights, so
    another "model" with the same vocabulary)."""
    vocab = vocab or make_vocab()
    rng = np.random.default_rng(seed)

    def rand(*shape: int, s: float = scale) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arch, n_ff = "bert", 2 * n_embd
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-bert-{seed}")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    write_tokenizer(w, vocab, chat_template=None)
    w.add_uint32("tokenizer.ggml.token_type_count", 2)  # BERT's sentence A/B types (llama.cpp requires a count)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType(POOLING_MEAN))
    w.add_tensor("token_embd.weight", rand(len(vocab.tokens), n_embd, s=1.0))
    w.add_tensor("token_types.weight", rand(2, n_embd))
    w.add_tensor("position_embd.weight", rand(n_ctx, n_embd))
    w.add_tensor("token_embd_norm.weight", ones(n_embd))
    w.add_tensor("token_embd_norm.bias", zeros(n_embd))
    for il in range(n_layer):
        p = f"blk.{il}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + name + ".weight", rand(n_embd, n_embd))
            w.add_tensor(p + name + ".bias", zeros(n_embd))
        w.add_tensor(p + "attn_output_norm.weight", ones(n_embd))
        w.add_tensor(p + "attn_output_norm.bias", zeros(n_embd))
        w.add_tensor(p + "ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.bias", zeros(n_ff))
        w.add_tensor(p + "ffn_down.weight", rand(n_embd, n_ff))
        w.add_tensor(p + "ffn_down.bias", zeros(n_embd))
        w.add_tensor(p + "layer_output_norm.weight", ones(n_embd))
        w.add_tensor(p + "layer_output_norm.bias", zeros(n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
