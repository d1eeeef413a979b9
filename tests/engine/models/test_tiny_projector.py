"""`python -m engine.models.tinymodel --mmproj`: a tiny target and a random projector that
llama.cpp's mtmd loads as a pair."""

from __future__ import annotations

import pytest

from engine.models.tinymodel import main
from image_files import png_bytes


def test_tinymodel_writes_a_target_and_its_projector(tmp_path, capsys):
    out, proj = tmp_path / "t.gguf", tmp_path / "mmproj-t.gguf"
    assert main(["--arch", "qwen35", "--mtp", "--mmproj", str(proj), str(out)]) == 0
    assert out.is_file() and proj.is_file()
    assert proj.stat().st_size < 400_000  # tiny: tests load it in milliseconds

    from engine.documents.images import ImageInput, decode_image
    from engine.llamacpp.llama import Model
    from engine.llamacpp.vision import Projector

    model = Model(out)
    try:
        projector = Projector(model, proj, n_threads=1)
        assert projector.mrope  # qwen35 reads pictures at M-RoPE positions
        enc = projector.encode(decode_image(ImageInput(png_bytes(32, 32))))
        assert enc.embd.shape == (16, model.n_embd)  # 8x8 patches merged 2x2
        assert enc.n_pos == 4  # a 4x4 grid advances the position by max(w, h)
        projector.close()
    finally:
        model.close()


def test_mmproj_is_refused_for_an_arch_it_does_not_pair_with(tmp_path, capsys):
    assert main(["--arch", "lfm2", "--mmproj", str(tmp_path / "p.gguf"), str(tmp_path / "t.gguf")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tinymodel: --mmproj applies to llama, qwen35, qwen3vl and gemma4 only, not lfm2"


def test_a_gemma4_projector_pairs_with_the_tiny_gemma4(tmp_path):
    out, proj = tmp_path / "g.gguf", tmp_path / "mmproj-g.gguf"
    assert main(["--arch", "gemma4", "--mmproj", str(proj), str(out)]) == 0

    from engine.documents.images import ImageInput, decode_image
    from engine.llamacpp.llama import Model
    from engine.llamacpp.vision import Projector

    model = Model(out)
    try:
        projector = Projector(model, proj, n_threads=1)
        assert not projector.mrope  # Gemma 4 reads pictures at plain positions
        enc = projector.encode(decode_image(ImageInput(png_bytes(32, 32))))
        assert enc.embd.shape == (81, model.n_embd) and enc.n_pos == 81  # scaled up to the family's 70 at least
        projector.close()
    finally:
        model.close()


def test_a_qwen3vl_text_model_reads_pictures_at_m_rope_positions(tmp_path):
    """The attention-only Qwen3-VL text model: a target the parallel slots run whose pictures
    take fewer positions than cells."""
    out, proj = tmp_path / "q.gguf", tmp_path / "mmproj-q.gguf"
    assert main(["--arch", "qwen3vl", "--mmproj", str(proj), str(out)]) == 0

    from engine.documents.images import ImageInput, decode_image
    from engine.llamacpp.llama import Model
    from engine.llamacpp.vision import ImageSpan, Projector

    model = Model(out)
    try:
        assert not model.recurrent_state
        projector = Projector(model, proj, n_threads=1)
        assert projector.mrope
        assert ImageSpan(0, projector.encode(decode_image(ImageInput(png_bytes(32, 32))))).shift == 16 - 4
        projector.close()
    finally:
        model.close()
