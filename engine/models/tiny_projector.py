"""A tiny random vision projector (`mmproj`) GGUF that llama.cpp's mtmd loads for a tiny target.

The tests need a target that sees. For qwen35 (and llama): a projector of the type Qwen3-VL and Qwen3.5 ship
(`qwen3vl_merger`: a ViT with M-RoPE attention, a 2x2 spatial merge and a two-layer MLP
into the text model's width), shrunk to one block of width 32 over 4-pixel patches, so a
32x32 picture becomes 16 image tokens (a 4x4 grid after the merge) in milliseconds. Names,
keys and shapes follow the vendored llama.cpp (tools/mtmd/clip-impl.h, clip.cpp's loader,
models/qwen3vl.cpp); no deepstack layers, so the output is exactly the target's width.
Random weights, float32: what the image "means" to the target is noise, but the pipeline
(encode, decode the embeddings at M-RoPE positions, speculate after them) is the real one.

For gemma4: Gemma 4's `gemma4v` (a ViT with RMS norms and 2-D RoPE over learned x/y position
tables, 3x3 average pooling, one projection into the text width; models/gemma4v.cpp), one
block of width 32 over 4-pixel patches; its family reads at least 70 image tokens a picture,
so a 32x32 picture is scaled up to 81. The image is read with non-causal attention, as the
family's larger sizes read it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import gguf

PROJECTOR_TYPE = "qwen3vl_merger"
PATCH = 4  # pixels per patch side
MERGE = 2  # the spatial merge: 2x2 patches per image token
IMAGE_SIZE = 32  # the position-embedding grid's side in pixels (8x8 patches; other sizes interpolate)



def _clip_writer(path: Path, name: str, projector: str, n_embd: int, n_ff: int, n_layer: int, text_embd: int,
                 n_head: int) -> "gguf.GGUFWriter":
    """A clip GGUF writer with the vision-tower keys every tiny projector shares (its own keys
    and tensors follow)."""
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_string("clip.projector_type", projector)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.use_gelu", True)
    v = "clip.vision."
    w.add_uint32(v + "embedding_length", n_embd)
    w.add_uint32(v + "feed_forward_length", n_ff)
    w.add_uint32(v + "block_count", n_layer)
    w.add_uint32(v + "projection_dim", text_embd)
    w.add_uint32(v + "attention.head_count", n_head)
    w.add_float32(v + "attention.layer_norm_epsilon", 1e-6)
    w.add_uint32(v + "image_size", IMAGE_SIZE)
    w.add_uint32(v + "patch_size", PATCH)
    return w

def write_projector(path: str | os.PathLike[str], *, text_embd: int = 64, n_embd: int = 32, n_head: int = 2,
                    n_ff: int = 64, n_layer: int = 1, seed: int = 0, scale: float = 0.2, kind: str = "qwen3vl") -> Path:
    """Write a `qwen3vl_merger` projector (`kind` "gemma4": a `gemma4v` one) whose image
    embeddings are `text_embd` wide (the tiny targets' `n_embd`, 64)."""
    if kind == "gemma4":
        return _gemma4v(path, text_embd=text_embd, n_embd=n_embd, n_head=n_head, n_ff=n_ff, n_layer=n_layer,
                        seed=seed, scale=scale)
    if kind != "qwen3vl":
        raise ValueError(f"unknown projector kind {kind!r}; choose qwen3vl or gemma4")
    rng = np.random.default_rng(seed + 7919)

    def rand(*shape: int, s: float = scale) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = _clip_writer(path, "tiny-qwen3vl-mmproj", PROJECTOR_TYPE, n_embd, n_ff, n_layer, text_embd, n_head)
    v = "clip.vision."
    w.add_uint32(v + "spatial_merge_size", MERGE)
    w.add_array(v + "image_mean", [0.5, 0.5, 0.5])
    w.add_array(v + "image_std", [0.5, 0.5, 0.5])

    n_side = IMAGE_SIZE // PATCH
    # The temporal patch embedding as two 2-D convolutions (frames t and t+1), as the converter writes it.
    w.add_tensor("v.patch_embd.weight", rand(n_embd, 3, PATCH, PATCH))
    w.add_tensor("v.patch_embd.weight.1", rand(n_embd, 3, PATCH, PATCH))
    w.add_tensor("v.patch_embd.bias", rand(n_embd))
    w.add_tensor("v.position_embd.weight", rand(n_side * n_side, n_embd))
    for il in range(n_layer):
        p = f"v.blk.{il}."
        w.add_tensor(p + "ln1.weight", ones(n_embd))
        w.add_tensor(p + "ln1.bias", np.zeros(n_embd, np.float32))
        w.add_tensor(p + "attn_qkv.weight", rand(3 * n_embd, n_embd))
        w.add_tensor(p + "attn_qkv.bias", rand(3 * n_embd))
        w.add_tensor(p + "attn_out.weight", rand(n_embd, n_embd))
        w.add_tensor(p + "attn_out.bias", rand(n_embd))
        w.add_tensor(p + "ln2.weight", ones(n_embd))
        w.add_tensor(p + "ln2.bias", np.zeros(n_embd, np.float32))
        w.add_tensor(p + "ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.bias", rand(n_ff))
        w.add_tensor(p + "ffn_down.weight", rand(n_embd, n_ff))
        w.add_tensor(p + "ffn_down.bias", rand(n_embd))
    w.add_tensor("v.post_ln.weight", ones(n_embd))
    w.add_tensor("v.post_ln.bias", np.zeros(n_embd, np.float32))
    merged = n_embd * MERGE * MERGE
    # Unit-scale output: the image embeddings sit in the range the target's token embeddings do.
    w.add_tensor("mm.0.weight", rand(merged, merged))
    w.add_tensor("mm.0.bias", rand(merged))
    w.add_tensor("mm.2.weight", rand(text_embd, merged, s=1.0 / np.sqrt(merged)))
    w.add_tensor("mm.2.bias", rand(text_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


GEMMA4_POS = 512  # rows of each learned position table (x and y): patches per side at most


def _gemma4v(path: str | os.PathLike[str], *, text_embd: int, n_embd: int, n_head: int, n_ff: int, n_layer: int,
             seed: int, scale: float) -> Path:
    rng = np.random.default_rng(seed + 104729)

    def rand(*shape: int, s: float = scale) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(np.float32)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = _clip_writer(path, "tiny-gemma4v-mmproj", "gemma4v", n_embd, n_ff, n_layer, text_embd, n_head)
    v = "clip.vision."
    w.add_uint32(v + "projector.scale_factor", 3)
    w.add_array(v + "image_mean", [0.0, 0.0, 0.0])
    w.add_array(v + "image_std", [1.0, 1.0, 1.0])
    w.add_tensor("v.patch_embd.weight", rand(n_embd, 3, PATCH, PATCH))
    w.add_tensor("v.position_embd.weight", rand(2, GEMMA4_POS, n_embd))  # the x table, then the y table
    for il in range(n_layer):
        p = f"v.blk.{il}."
        w.add_tensor(p + "ln1.weight", np.ones(n_embd, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(p + name + ".weight", rand(n_embd, n_embd))
        w.add_tensor(p + "ln2.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", rand(n_embd, n_ff))
    w.add_tensor("mm.input_projection.weight", rand(text_embd, n_embd, s=1.0))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
