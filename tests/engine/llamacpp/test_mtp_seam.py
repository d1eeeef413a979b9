"""The one seam over llama.cpp's staging API: a build without its MTP entry points is one
line naming what is missing, not an AttributeError deep in a run."""

from __future__ import annotations

import sys
import types

import pytest

from engine.errors import UnsupportedModelError
from engine.llamacpp import mtp
from engine.llamacpp.llama import Model


def test_a_build_without_the_mtp_symbols_is_refused_in_one_line(monkeypatch, tiny_hybrid):
    import llama_cpp

    stub = types.ModuleType("llama_cpp.llama_cpp_ext")
    stub.llama_set_embeddings_nextn = lambda *a: None  # the others missing, as on an older build
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_cpp_ext", stub)
    monkeypatch.setattr(llama_cpp, "llama_cpp_ext", stub, raising=False)
    model = Model(tiny_hybrid)
    try:
        why = mtp.mtp_refusal(model)
        assert why is not None and "lacks llama_get_embeddings_nextn" in why and "\n" not in why
        with pytest.raises(UnsupportedModelError, match="cannot run MTP heads"):
            from engine.decoding.drafting.mtp_drafter import MTPDrafter

            MTPDrafter(model)
    finally:
        model.close()


def test_the_real_build_has_them(tiny_hybrid, tiny_target):
    hybrid, plain = Model(tiny_hybrid), Model(tiny_target)
    try:
        assert mtp.mtp_refusal(hybrid) is None
        assert "has no MTP layers" in (mtp.mtp_refusal(plain) or "")
    finally:
        hybrid.close()
        plain.close()


def test_the_head_chains_from_the_last_row_it_read_however_the_context_was_read(tiny_hybrid):
    """`extend` pairs a drafted token with the head's hidden state of the last position: the
    same whether the head read the context in one batch, the last token alone, or after
    another context sharing its first token (llama.cpp's "masked" rows gave the batch's first)."""
    import numpy as np

    from engine.llamacpp.context import Context
    from engine.llamacpp.runtime import RuntimeParams

    model = Model(tiny_hybrid)
    rng = np.random.default_rng(0)
    a = [int(t) for t in rng.integers(3, model.n_vocab, size=12)]
    other = a[:1] + [int(t) for t in rng.integers(3, model.n_vocab, size=9)]

    def drafts(first: list[list[int]]) -> list[np.ndarray]:
        ctx = Context(model, RuntimeParams(n_ctx=256, n_batch=64, n_threads=1))
        hidden = mtp.HiddenStates(ctx)
        head = mtp.MtpContext(ctx, hidden)
        try:
            for c in first:
                ctx.clear()
                ctx.decode(c[:-1], logits="none")
                head.sync(c)
                head.extend(5)
                head.truncate(len(c))
            ctx.clear()
            ctx.decode(a[:-1], logits="none")
            rows = [head.sync(a).copy()]
            for _ in range(2):
                rows.append(head.extend(int(np.argmax(rows[-1]))).copy())
            return rows
        finally:
            head.close()
            hidden.close()
            ctx.close()

    try:
        want = drafts([a[:-1]])  # the last token read alone
        for first in ([], [other]):
            got = drafts(first)
            assert all(np.abs(g - w).max() < 1e-4 for g, w in zip(got, want)), f"after {len(first)} other contexts"
    finally:
        model.close()
