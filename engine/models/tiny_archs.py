"""Tiny random GGUFs of the 2026 architectures: hybrid Qwen3.5 (optionally with its MTP
head), LFM2 (short convolutions + attention), Gemma 4 with its assistant drafter (a
separate MTP model that reads the target's own KV cache), and Qwen3-VL's text model
(attention only, M-RoPE: a picture takes fewer positions than cells, on a target the
parallel slots run).

The tests need models llama.cpp loads as what they are (hybrid, with nextn layers, a
`gemma4-assistant` drafter) without downloading gigabytes. Tensor names and shapes follow
the vendored llama.cpp's loaders (src/models/qwen35.cpp, lfm2.cpp, gemma4.cpp, gemma4-assistant.cpp,
qwen3vl.cpp); the
vocabulary is `tinymodel.make_vocab`'s, so the same arch with another seed gives the same
vocabulary and other weights (a same-family draft for a target). Random weights, float32.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np

import gguf

from .tiny_vocab import Vocab, make_vocab, write_tokenizer

ARCHS = ("qwen35", "lfm2", "gemma4", "gemma4-assistant", "qwen3vl")

_Rand = Callable[..., np.ndarray]


def write_arch_model(path: str | os.PathLike[str], arch: str, *, mtp: bool = False, seed: int = 0,
                     vocab: Vocab | None = None, n_embd: int = 64, scale: float = 0.2) -> Path:
    """Write a tiny random `arch` model to `path`. `mtp` (qwen35): one nextn layer after the
    trunk, loaded by llama.cpp when asked (`load_mtp`)."""
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny architecture {arch!r}; choose one of {', '.join(ARCHS)}")
    if mtp and arch != "qwen35":
        raise ValueError(f"--mtp applies to qwen35 only, not {arch}")
    vocab = vocab or make_vocab()
    rng = np.random.default_rng(seed)

    def rand(*shape: int, s: float = scale) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(np.float32)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch)
    _tokenizer(w, vocab, name=f"tiny-{arch}{'-mtp' if mtp else ''}")
    n_vocab = len(vocab.tokens)
    emb = rand(n_vocab, n_embd, s=1.0)
    out = rand(n_vocab, n_embd, s=1.0)
    # Readable greedy text: byte tokens and specials (EOS too) never win.
    out[[vocab.byte(b) for b in range(256)]] = 0
    out[:5] = 0
    if arch == "gemma4-assistant":  # drafts for the gemma4 target: its hidden states are the target's width
        n_embd = max(32, n_embd // 2)
        out = emb = rand(n_vocab, n_embd, s=1.0)  # tied: the assistant's output is its embedding
    {"qwen35": _qwen35, "lfm2": _lfm2, "gemma4": _gemma4, "gemma4-assistant": _gemma4_assistant,
     "qwen3vl": _qwen3vl}[arch](
        w, rand, emb=emb, out=out, n_embd=n_embd, mtp=mtp)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _ones(n: int) -> np.ndarray:
    return np.ones(n, dtype=np.float32)


def _tokenizer(w: gguf.GGUFWriter, vocab: Vocab, *, name: str) -> None:
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    write_tokenizer(w, vocab)


def _common(w: gguf.GGUFWriter, *, n_embd: int, n_layer: int, n_ff: int, n_ctx: int = 2048) -> None:
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_layer_norm_rms_eps(1e-6)


def _mlp(w: gguf.GGUFWriter, rand: _Rand, p: str, n_embd: int, n_ff: int) -> None:
    w.add_tensor(p + "ffn_gate.weight", rand(n_ff, n_embd))
    w.add_tensor(p + "ffn_up.weight", rand(n_ff, n_embd))
    w.add_tensor(p + "ffn_down.weight", rand(n_embd, n_ff))


def _mrope_attention_keys(w: gguf.GGUFWriter, arch: str, n_head: int, n_head_kv: int, head: int) -> None:
    """The attention keys Qwen3.5 and Qwen3-VL share: heads, head sizes and M-RoPE's sections."""
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head)
    w.add_value_length(head)
    w.add_rope_dimension_count(head)
    w.add_array(f"{arch}.rope.dimension_sections", [head // 8, head // 8, 0, 0])


def _qk_norm_attention(w: gguf.GGUFWriter, rand: _Rand, p: str, n_embd: int, n_head: int, n_head_kv: int, head: int,
                       *, gated: bool = False) -> None:
    """One attention block's tensors with q/k norms (`gated`: Qwen3.5's query carries its gate too)."""
    w.add_tensor(p + "attn_q.weight", rand(head * n_head * (2 if gated else 1), n_embd))
    w.add_tensor(p + "attn_k.weight", rand(head * n_head_kv, n_embd))
    w.add_tensor(p + "attn_v.weight", rand(head * n_head_kv, n_embd))
    w.add_tensor(p + "attn_output.weight", rand(n_embd, head * n_head))
    w.add_tensor(p + "attn_q_norm.weight", _ones(head))
    w.add_tensor(p + "attn_k_norm.weight", _ones(head))


def _qwen35(w: gguf.GGUFWriter, rand: _Rand, *, emb: np.ndarray, out: np.ndarray, n_embd: int, mtp: bool) -> None:
    """Gated-delta-net layers with a full-attention layer every second one (Qwen3.5's 3:1
    shrunk to 1:1); the MTP layer, when asked, is one more full-attention block with the
    nextn projection that reads [embedding(token), target hidden state]."""
    arch = "qwen35"
    n_trunk, n_ff, n_head, n_head_kv, head = 2, 128, 2, 1, 32
    d_state, n_group, n_v_heads = 16, 2, 4  # head_k_dim = head_v_dim = d_state
    key_dim, value_dim = d_state * n_group, d_state * n_v_heads
    n_layer = n_trunk + (1 if mtp else 0)
    _common(w, n_embd=n_embd, n_layer=n_layer, n_ff=n_ff)
    _mrope_attention_keys(w, arch, n_head, n_head_kv, head)
    w.add_uint32(f"{arch}.full_attention_interval", 2)
    w.add_uint32(f"{arch}.ssm.conv_kernel", 4)
    w.add_uint32(f"{arch}.ssm.inner_size", value_dim)
    w.add_uint32(f"{arch}.ssm.state_size", d_state)
    w.add_uint32(f"{arch}.ssm.time_step_rank", n_v_heads)
    w.add_uint32(f"{arch}.ssm.group_count", n_group)
    if mtp:
        w.add_uint32(f"{arch}.nextn_predict_layers", 1)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", _ones(n_embd))
    w.add_tensor("output.weight", out)

    def attention(p: str) -> None:
        _qk_norm_attention(w, rand, p, n_embd, n_head, n_head_kv, head, gated=True)

    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", _ones(n_embd))
        w.add_tensor(p + "post_attention_norm.weight", _ones(n_embd))
        if il >= n_trunk:  # the MTP block
            attention(p)
            w.add_tensor(p + "nextn.eh_proj.weight", rand(n_embd, 2 * n_embd))
            w.add_tensor(p + "nextn.enorm.weight", _ones(n_embd))
            w.add_tensor(p + "nextn.hnorm.weight", _ones(n_embd))
            w.add_tensor(p + "nextn.shared_head_norm.weight", _ones(n_embd))
        elif (il + 1) % 2 == 0:
            attention(p)
        else:
            w.add_tensor(p + "attn_qkv.weight", rand(key_dim * 2 + value_dim, n_embd))
            w.add_tensor(p + "attn_gate.weight", rand(value_dim, n_embd))
            w.add_tensor(p + "ssm_conv1d.weight", rand(key_dim * 2 + value_dim, 4))
            w.add_tensor(p + "ssm_dt.bias", rand(n_v_heads))
            w.add_tensor(p + "ssm_a", -np.abs(rand(n_v_heads, s=1.0)))
            w.add_tensor(p + "ssm_beta.weight", rand(n_v_heads, n_embd))
            w.add_tensor(p + "ssm_alpha.weight", rand(n_v_heads, n_embd))
            w.add_tensor(p + "ssm_norm.weight", _ones(d_state))
            w.add_tensor(p + "ssm_out.weight", rand(n_embd, value_dim))
        _mlp(w, rand, p, n_embd, n_ff)


def _qwen3vl(w: gguf.GGUFWriter, rand: _Rand, *, emb: np.ndarray, out: np.ndarray, n_embd: int, mtp: bool) -> None:
    """Qwen3 attention blocks (q/k norms) with M-RoPE's sections and no deepstack layers: the
    text model of a Qwen3-VL, whose pictures (a qwen3vl projector's) advance the position by
    max(w, h) of their grid, not by their cells."""
    arch = "qwen3vl"
    n_layer, n_ff, n_head, n_head_kv, head = 2, 128, 2, 1, 32
    _common(w, n_embd=n_embd, n_layer=n_layer, n_ff=n_ff)
    _mrope_attention_keys(w, arch, n_head, n_head_kv, head)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", _ones(n_embd))
    w.add_tensor("output.weight", out)
    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", _ones(n_embd))
        _qk_norm_attention(w, rand, p, n_embd, n_head, n_head_kv, head)
        w.add_tensor(p + "ffn_norm.weight", _ones(n_embd))
        _mlp(w, rand, p, n_embd, n_ff)


def _lfm2(w: gguf.GGUFWriter, rand: _Rand, *, emb: np.ndarray, out: np.ndarray, n_embd: int, mtp: bool) -> None:
    """Short-convolution layers with an attention layer between them (head_count_kv 0 marks
    a convolution layer, as in LiquidAI's files)."""
    arch = "lfm2"
    n_layer, n_ff, n_head, n_head_kv, l_cache = 3, 128, 2, 1, 3
    head = n_embd // n_head
    kv_per_layer = [0, n_head_kv, 0]
    _common(w, n_embd=n_embd, n_layer=n_layer, n_ff=n_ff)
    w.add_head_count(n_head)
    w.add_array(f"{arch}.attention.head_count_kv", kv_per_layer)
    w.add_rope_dimension_count(head)
    w.add_uint32(f"{arch}.shortconv.l_cache", l_cache)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("token_embd_norm.weight", _ones(n_embd))
    w.add_tensor("output.weight", out)
    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", _ones(n_embd))
        w.add_tensor(p + "ffn_norm.weight", _ones(n_embd))
        if kv_per_layer[il]:
            w.add_tensor(p + "attn_q.weight", rand(n_embd, n_embd))
            w.add_tensor(p + "attn_k.weight", rand(head * n_head_kv, n_embd))
            w.add_tensor(p + "attn_v.weight", rand(head * n_head_kv, n_embd))
            w.add_tensor(p + "attn_output.weight", rand(n_embd, n_embd))
            w.add_tensor(p + "attn_q_norm.weight", _ones(head))
            w.add_tensor(p + "attn_k_norm.weight", _ones(head))
        else:
            w.add_tensor(p + "shortconv.conv.weight", rand(n_embd, l_cache))
            w.add_tensor(p + "shortconv.in_proj.weight", rand(3 * n_embd, n_embd))
            w.add_tensor(p + "shortconv.out_proj.weight", rand(n_embd, n_embd))
        _mlp(w, rand, p, n_embd, n_ff)


# Gemma 4: sliding-window layers with one full-attention layer last (its assistant reads the
# target's last sliding and last full layer's KV cache), no per-layer embeddings.
_G4_LAYERS, _G4_HEAD, _G4_HEADS, _G4_TARGET_EMBD = 4, 32, 2, 64
_G4_SWA = [1, 1, 1, 0]  # the last layer full attention, the one before it sliding


def _gemma4_common(w: gguf.GGUFWriter, arch: str, *, n_embd: int, n_layer: int, swa: list[int]) -> None:
    _common(w, n_embd=n_embd, n_layer=n_layer, n_ff=2 * n_embd)
    w.add_head_count(_G4_HEADS)
    w.add_head_count_kv(1)
    w.add_key_length(_G4_HEAD)
    w.add_value_length(_G4_HEAD)
    w.add_uint32(f"{arch}.attention.key_length_swa", _G4_HEAD)
    w.add_uint32(f"{arch}.attention.value_length_swa", _G4_HEAD)
    w.add_uint32(f"{arch}.attention.sliding_window", 64)
    w.add_array(f"{arch}.attention.sliding_window_pattern", [bool(x) for x in swa])
    w.add_rope_dimension_count(_G4_HEAD)
    w.add_float32(f"{arch}.rope.freq_base_swa", 10000.0)


def _gemma4(w: gguf.GGUFWriter, rand: _Rand, *, emb: np.ndarray, out: np.ndarray, n_embd: int, mtp: bool) -> None:
    arch, n_embd = "gemma4", _G4_TARGET_EMBD
    emb, out = emb[:, :n_embd].copy(), out[:, :n_embd].copy()
    _gemma4_common(w, arch, n_embd=n_embd, n_layer=_G4_LAYERS, swa=_G4_SWA)
    w.add_uint32(f"{arch}.embedding_length_per_layer_input", 0)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output.weight", out)
    w.add_tensor("output_norm.weight", _ones(n_embd))
    w.add_tensor("rope_freqs.weight", _ones(_G4_HEAD // 2))
    for il, sliding in enumerate(_G4_SWA):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", _ones(n_embd))
        w.add_tensor(p + "attn_q.weight", rand(_G4_HEAD * _G4_HEADS, n_embd))
        w.add_tensor(p + "attn_k.weight", rand(_G4_HEAD, n_embd))
        w.add_tensor(p + "attn_v.weight", rand(_G4_HEAD, n_embd))
        w.add_tensor(p + "attn_output.weight", rand(n_embd, _G4_HEAD * _G4_HEADS))
        w.add_tensor(p + "attn_q_norm.weight", _ones(_G4_HEAD))
        w.add_tensor(p + "attn_k_norm.weight", _ones(_G4_HEAD))
        w.add_tensor(p + "post_attention_norm.weight", _ones(n_embd))
        w.add_tensor(p + "layer_output_scale.weight", _ones(1))
        w.add_tensor(p + "ffn_norm.weight", _ones(n_embd))
        _mlp(w, rand, p, n_embd, 2 * n_embd)
        w.add_tensor(p + "post_ffw_norm.weight", _ones(n_embd))


def _gemma4_assistant(w: gguf.GGUFWriter, rand: _Rand, *, emb: np.ndarray, out: np.ndarray, n_embd: int,
                      mtp: bool) -> None:
    """Two layers (sliding, full) with queries only: keys and values come from the target."""
    arch, backbone = "gemma4-assistant", _G4_TARGET_EMBD
    swa = [1, 0]
    _gemma4_common(w, arch, n_embd=n_embd, n_layer=len(swa), swa=swa)
    w.add_uint32(f"{arch}.nextn_predict_layers", len(swa))
    w.add_uint32(f"{arch}.embedding_length_out", backbone)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", _ones(n_embd))
    w.add_tensor("nextn.post_projection.weight", rand(backbone, n_embd))
    w.add_tensor("rope_freqs.weight", _ones(_G4_HEAD // 2))
    for il in range(len(swa)):
        p = f"blk.{il}."
        if il == 0:
            w.add_tensor("nextn.pre_projection.weight", rand(n_embd, 2 * backbone))
        w.add_tensor(p + "attn_norm.weight", _ones(n_embd))
        w.add_tensor(p + "attn_q.weight", rand(_G4_HEAD * _G4_HEADS, n_embd))
        w.add_tensor(p + "attn_output.weight", rand(n_embd, _G4_HEAD * _G4_HEADS))
        w.add_tensor(p + "attn_q_norm.weight", _ones(_G4_HEAD))
        w.add_tensor(p + "post_attention_norm.weight", _ones(n_embd))
        w.add_tensor(p + "layer_output_scale.weight", _ones(1))
        w.add_tensor(p + "ffn_norm.weight", _ones(n_embd))
        _mlp(w, rand, p, n_embd, 2 * n_embd)
        w.add_tensor(p + "post_ffw_norm.weight", _ones(n_embd))
