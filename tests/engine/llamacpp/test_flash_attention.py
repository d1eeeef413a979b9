"""Flash attention (`runtime.flash_attention`): llama.cpp's own choice unless asked, one
answer for every context of a process, so KV states still move between them (the plain twin,
the slots, the prompt cache)."""

from __future__ import annotations

import pytest

from engine.errors import TandemError
from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams, flash_attention

RT = RuntimeParams(n_ctx=512, n_batch=64, n_threads=2)


@pytest.mark.parametrize("mode, want", [("auto", None), ("on", True), ("off", False)])
def test_the_mode_decides(mode, want):
    assert flash_attention(mode) is want


def test_the_environment_asks_when_no_mode_is_given(monkeypatch):
    monkeypatch.delenv("TANDEM_FLASH_ATTN", raising=False)
    assert flash_attention() is None
    monkeypatch.setenv("TANDEM_FLASH_ATTN", "off")
    assert flash_attention() is False
    monkeypatch.setenv("TANDEM_FLASH_ATTN", "fast")
    with pytest.raises(TandemError, match=r"TANDEM_FLASH_ATTN.*auto, on, off.*'fast'"):
        flash_attention()


@pytest.mark.parametrize("env, layout", [(None, "fa-1"), ("on", "fa1"), ("off", "fa0")])
def test_every_context_takes_the_same_answer(tiny_target, monkeypatch, env, layout):
    """A model's contexts (the writing one and the plain twin's, of another load of the file)
    are made with the same setting, named in the prompt cache's key, and a state moves between
    them; llama.cpp refuses one made with flash attention off where it was on, or the reverse
    (its V cache is transposed without)."""
    if env is None:
        monkeypatch.delenv("TANDEM_FLASH_ATTN", raising=False)
    else:
        monkeypatch.setenv("TANDEM_FLASH_ATTN", env)
    target, twin = Model(tiny_target), Model(tiny_target, runtime=RuntimeParams(n_gpu_layers=0), repack=False)
    a, b = Context(target, RT), Context(twin, RuntimeParams(n_ctx=256, n_batch=64, n_threads=2))
    try:
        assert layout in a.state_identity and layout in b.state_identity
        a.decode(list(range(5, 60)), logits="none")
        state = a.save_state()
        assert state is not None and b.load_state(state, a.keyed_tokens())
        assert b.tokens == a.tokens
        monkeypatch.setenv("TANDEM_FLASH_ATTN", "on" if layout == "fa0" else "off")
        other = Context(twin, RuntimeParams(n_ctx=256, n_batch=64, n_threads=2))
        try:
            assert not other.load_state(state, a.keyed_tokens())
        finally:
            other.close()
    finally:
        for x in (a, b, target, twin):
            x.close()
