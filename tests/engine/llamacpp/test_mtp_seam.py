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
