"""Write tiny llama-architecture GGUF models with the `gguf` package.

Used by the tests (fast, deterministic models), the packaged app's `--self-test`, and the
GPU benchmark (shape-realistic random models). Two kinds:

* random: a few layers of small random weights — real attention, real numerics;
* scripted: attention and MLP weights are zero, so the next token depends only on the
  current one through embedding -> output. `chain` maps token -> next token, so a test
  decides exactly what the model writes (multi-byte characters, EOS, copying the prompt).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

import gguf

from .tiny_vocab import (BYTE, CHATML_TEMPLATE, CONTROL, FIM_TOKENS, NORMAL, UNKNOWN, WORDS, Vocab, make_vocab,
                         write_tokenizer)

__all__ = ["BYTE", "CHATML_TEMPLATE", "CONTROL", "FIM_TOKENS", "NORMAL", "UNKNOWN", "WORDS", "Vocab", "chain_through",
           "make_vocab", "respelled_vocab", "write_model"]


def write_model(
    path: str | os.PathLike[str],
    *,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_kv_head: int = 2,
    n_ff: int = 128,
    n_ctx: int = 2048,
    seed: int = 0,
    scale: float = 0.2,
    vocab: Vocab | None = None,
    chain: Mapping[int, int] | None = None,
    chat_template: str | None = CHATML_TEMPLATE,
    name: str = "tiny",
    dtype: type = np.float32,
    fill: Callable[..., np.ndarray] | None = None,
    rows: Sequence[int] | None = None,
) -> Path:
    """Write a llama GGUF; `chain` makes it scripted (see module doc).

    `fill(*shape)` supplies random weights instead of seeded normals (the GPU probe's
    multi-gigabyte models reuse one random block). `rows` (random models): token i gets
    the weights row rows[i] of the model drawn with this seed over max(rows) + 1 tokens, so
    the same seed with another vocabulary spelling the same texts computes the same
    function of the text (a draft of another vocabulary that agrees with its target)."""
    vocab = vocab or make_vocab()
    n_vocab = len(vocab.tokens)
    n_rows = n_vocab if rows is None else max(rows) + 1
    rng = np.random.default_rng(seed)
    head_dim = n_embd // n_head
    n_embd_kv = head_dim * n_kv_head

    def rand(*shape: int, s: float = scale) -> np.ndarray:
        if fill is not None:
            return fill(*shape).astype(dtype, copy=False)
        return (rng.standard_normal(shape) * s).astype(dtype)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    _add_metadata(w, vocab, name=name, n_ctx=n_ctx, n_embd=n_embd, n_layer=n_layer, n_ff=n_ff, n_head=n_head,
                  n_kv_head=n_kv_head, dtype=dtype, chat_template=chat_template)

    if chain is None:
        emb = rand(n_rows, n_embd, s=1.0)
        out = rand(n_rows, n_embd, s=1.0)
        if rows is not None:
            emb, out = emb[list(rows)], out[list(rows)]
        # Keep greedy text readable ASCII and long: byte tokens and specials (EOS too) never win.
        out[[vocab.byte(b) for b in range(256)]] = 0
        out[[0, 1, 2, 3, 4]] = 0
    else:
        emb = rand(n_vocab, n_embd, s=1.0)
        emb *= np.sqrt(n_embd) / np.linalg.norm(emb, axis=1, keepdims=True)  # unit RMS: the norm keeps it
        out = np.zeros((n_vocab, n_embd), dtype=dtype)
        for cur, nxt in chain.items():
            out[nxt] += emb[cur] * 2.0

    def layer(*shape: int) -> np.ndarray:
        """Random layer weights, or zeros for a scripted model (the residual stream passes through)."""
        return rand(*shape) if chain is None else np.zeros(shape, dtype=dtype)

    w.add_tensor("token_embd.weight", emb.astype(dtype))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("output.weight", out.astype(dtype))
    for i in range(n_layer):
        _add_block(w, i, layer, n_embd=n_embd, n_embd_kv=n_embd_kv, n_ff=n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _add_block(w: gguf.GGUFWriter, i: int, layer: Callable[..., np.ndarray], *, n_embd: int, n_embd_kv: int,
               n_ff: int) -> None:
    """One transformer block's tensors: attention and a gated MLP, each with its RMS norm."""
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor(p + "attn_q.weight", layer(n_embd, n_embd))
    w.add_tensor(p + "attn_k.weight", layer(n_embd_kv, n_embd))
    w.add_tensor(p + "attn_v.weight", layer(n_embd_kv, n_embd))
    w.add_tensor(p + "attn_output.weight", layer(n_embd, n_embd))
    w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor(p + "ffn_gate.weight", layer(n_ff, n_embd))
    w.add_tensor(p + "ffn_up.weight", layer(n_ff, n_embd))
    w.add_tensor(p + "ffn_down.weight", layer(n_embd, n_ff))


def _add_metadata(w: gguf.GGUFWriter, vocab: Vocab, *, name: str, n_ctx: int, n_embd: int, n_layer: int, n_ff: int,
                  n_head: int, n_kv_head: int, dtype: type, chat_template: str | None) -> None:
    """The llama architecture's hyperparameters and the tokenizer, as llama.cpp reads them."""
    head_dim = n_embd // n_head
    w.add_name(name)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv_head)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == np.float32 else gguf.LlamaFileType.MOSTLY_F16)
    write_tokenizer(w, vocab, chat_template)


def chain_through(ids: list[int]) -> dict[int, int]:
    """A chain that walks `ids` in order (each id must appear once, except the last)."""
    return {a: b for a, b in zip(ids, ids[1:])}


def respelled_vocab(base: Vocab, merges: Sequence[tuple[str, str]] = (("▁of", "▁the"), ("▁is", "▁in"))) -> tuple[Vocab, list[int]]:
    """Another tokenizer for `base`'s texts: the same pieces under other ids (the words in
    reverse order) plus `merges`, pieces joining two of base's (so it splits some texts
    differently). Returns it with `rows` for `write_model`: each new token's row in base's
    order (a merged piece takes its first part's), so a model written with the same seed
    agrees with base's on any text."""
    n0 = 5 + 256  # specials and byte tokens keep their ids
    order = list(range(n0)) + list(range(len(base.tokens) - 1, n0 - 1, -1))
    tokens = [base.tokens[i] for i in order]
    scores = [base.scores[i] for i in order]
    types = [base.types[i] for i in order]
    rows = list(order)
    for a, b in merges:
        tokens.append(a + b)
        scores.append(-0.5)  # preferred over the two parts
        types.append(NORMAL)
        rows.append(base.tokens.index(a))
    return Vocab(tokens, scores, types), rows


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m engine.models.tinymodel [--arch ARCH] [--mtp] [--mmproj PROJ.gguf] [--seed N] OUT.gguf`:
    a tiny random model (llama by default; the hybrid architectures of `tiny_archs`), and with
    --mmproj a random vision projector that llama.cpp's mtmd pairs with it (`tiny_projector`)."""
    import argparse

    from .tiny_archs import ARCHS, write_arch_model

    p = argparse.ArgumentParser(prog="python -m engine.models.tinymodel", description=main.__doc__)
    p.add_argument("out", help="the GGUF file to write")
    p.add_argument("--arch", default="llama", choices=("llama", *ARCHS))
    p.add_argument("--mtp", action="store_true", help="qwen35: add one multi-token-prediction layer")
    p.add_argument("--seed", type=int, default=0, help="the weights' seed (the vocabulary stays the same)")
    p.add_argument("--mmproj", metavar="PROJ.gguf",
                   help="llama, qwen35, qwen3vl, gemma4: also write a matching vision projector here")
    a = p.parse_args(argv)
    try:
        if a.mmproj and a.arch not in ("llama", "qwen35", "qwen3vl", "gemma4"):
            raise ValueError(f"--mmproj applies to llama, qwen35, qwen3vl and gemma4 only, not {a.arch}")
        if a.arch == "llama":
            if a.mtp:
                raise ValueError("--mtp applies to qwen35 only, not llama")
            path = write_model(a.out, seed=a.seed)
        else:
            path = write_arch_model(a.out, a.arch, mtp=a.mtp, seed=a.seed)
        if a.mmproj:
            from .tiny_projector import write_projector

            print(write_projector(a.mmproj, seed=a.seed, kind="gemma4" if a.arch == "gemma4" else "qwen3vl"))
    except (ValueError, OSError) as e:
        print(f"tinymodel: {e}", file=__import__("sys").stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
