"""Weight repacking (`runtime.weight_repacking`, $TANDEM_REPACK): on unless asked, passed to
llama.cpp at every load that does not say otherwise, and named in the prompt cache's key when
off, so states of the two layouts (which round differently) are never mixed."""

from __future__ import annotations

import llama_cpp
import pytest

from engine.errors import TandemError
from engine.llamacpp import llama as llama_module
from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams, weight_repacking

RT = RuntimeParams(n_ctx=256, n_batch=64, n_threads=2)


def test_on_unless_the_environment_says_off(monkeypatch):
    monkeypatch.delenv("TANDEM_REPACK", raising=False)
    assert weight_repacking() is True
    monkeypatch.setenv("TANDEM_REPACK", "off")
    assert weight_repacking() is False
    assert weight_repacking("on") is True
    monkeypatch.setenv("TANDEM_REPACK", "no")
    with pytest.raises(TandemError, match=r"TANDEM_REPACK.*on, off.*'no'"):
        weight_repacking()


@pytest.mark.parametrize("env, asked, want", [(None, None, True), ("off", None, False), ("on", None, True),
                                              ("off", True, True), ("on", False, False)])
def test_a_load_passes_the_setting_to_llama_cpp(tiny_target, monkeypatch, env, asked, want):
    """The environment decides a load that does not say (the target, the drafts); the plain
    twin's `repack=False` stands whatever it says."""
    if env is None:
        monkeypatch.delenv("TANDEM_REPACK", raising=False)
    else:
        monkeypatch.setenv("TANDEM_REPACK", env)
    seen = []
    real = llama_cpp.llama_model_load_from_file

    def load(path, params):
        seen.append(bool(params.use_extra_bufts))
        return real(path, params)

    monkeypatch.setattr(llama_module.llama_cpp, "llama_model_load_from_file", load)
    m = Model(tiny_target) if asked is None else Model(tiny_target, repack=asked)
    try:
        assert seen == [want] and m.repack is want
        ctx = Context(m, RT)
        try:
            assert ("|unrepacked" in ctx.state_identity) is (not want)
        finally:
            ctx.close()
    finally:
        m.close()


def test_a_bad_setting_is_one_line_before_anything_loads(tiny_target, monkeypatch):
    monkeypatch.setenv("TANDEM_REPACK", "fast")
    with pytest.raises(TandemError, match="weight repacking"):
        Model(tiny_target)
