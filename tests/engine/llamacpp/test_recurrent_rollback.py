"""A hybrid model's context rolls back exactly: llama.cpp's snapshots where they reach,
the checkpoint or a re-read where they do not (never a snapshot slot the last decode did
not write)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams
from engine.models.tiny_archs import write_arch_model

RT = RuntimeParams(n_ctx=256, n_batch=64, n_threads=1)


@pytest.fixture(scope="module")
def hybrid(tiny_hybrid):
    m = Model(tiny_hybrid)
    yield m
    m.close()


def _fresh_logits(model: Model, tokens: list[int]) -> np.ndarray:
    ref = Context(model, RT)
    try:
        return ref.decode(tokens, logits="last")[0].copy()
    finally:
        ref.close()


def test_tiny_archs_load_as_their_architecture(tiny_hybrid, tiny_hybrid_draft, tiny_lfm2, tmp_path, vocab):
    target, draft, lfm2 = Model(tiny_hybrid), Model(tiny_hybrid_draft), Model(tiny_lfm2)
    try:
        assert target.architecture == "qwen35" and target.recurrent_state and target.n_nextn == 1
        assert draft.recurrent_state and draft.n_nextn == 0
        assert lfm2.architecture == "lfm2" and lfm2.recurrent_state
        assert draft.n_vocab == target.n_vocab == lfm2.n_vocab  # another seed: the same vocabulary
        text = "the value of the data"
        assert target.tokenize(text) == draft.tokenize(text)
        a, b = _fresh_logits(target, target.tokenize(text)), _fresh_logits(draft, draft.tokenize(text))
        assert not np.allclose(a, b)  # ... and other weights
    finally:
        for m in (target, draft, lfm2):
            m.close()
    with pytest.raises(ValueError, match="unknown tiny architecture"):
        write_arch_model(tmp_path / "x.gguf", "mamba9")


@pytest.mark.parametrize("snapshots", [0, 2, 8])
def test_truncate_after_a_batch_matches_a_fresh_read(hybrid, snapshots):
    prompt = hybrid.tokenize("the value of the data is")
    batch = [300, 301, 302, 303, 304]
    ctx = Context(hybrid, RT, rollback=snapshots)
    assert ctx.rollback_depth == snapshots
    try:
        for back in range(1, len(batch) + 2):  # up to and past the whole batch
            ctx.clear()
            ctx.decode(prompt, logits="none")
            ctx.guard(len(batch), back)
            ctx.decode(batch, logits="all")
            ctx.truncate(ctx.n_past - back)
            kept = ctx.tokens[:]
            got = ctx.decode([310], logits="last")[0].copy()
            want = _fresh_logits(hybrid, kept + [310])
            assert np.abs(got - want).max() < 1e-3, f"back {back} with {snapshots} snapshots"
    finally:
        ctx.close()


def test_truncate_without_a_guard_still_exact(hybrid):
    """No checkpoint saved and the snapshots do not reach: the kept tokens are read again."""
    prompt = hybrid.tokenize("return total and the")
    ctx = Context(hybrid, RT, rollback=2)
    try:
        ctx.decode(prompt, logits="none")
        for t in (300, 301, 302, 303):  # single-token decodes: one snapshot each, never two back
            ctx.decode([t], logits="last")
        ctx.truncate(len(prompt) + 1)
        got = ctx.decode([310], logits="last")[0].copy()
        assert np.abs(got - _fresh_logits(hybrid, prompt + [300, 310])).max() < 1e-3
        # twice in a row after one decode: the snapshot is single-use, the second goes another way
        ctx.decode([311, 312, 313], logits="all")
        ctx.truncate(ctx.n_past - 1)
        ctx.truncate(ctx.n_past - 1)
        got = ctx.decode([314], logits="last")[0].copy()
        assert np.abs(got - _fresh_logits(hybrid, prompt + [300, 310, 311, 314])).max() < 1e-3
    finally:
        ctx.close()
