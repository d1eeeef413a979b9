"""`tandem generate --image FILE [--mmproj FILE]`: the same text with --draft none, lookup and
mtp after the picture, MTP drafting after it, the projector found beside the target, and a
missing projector, an unsupported file or a missing file one line before any model loads."""

from __future__ import annotations

import json
import shutil

import pytest

from engine.cli.main import main
from image_files import png_bytes


def generate(capsys, *argv: str) -> dict:
    assert main(["generate", "Describe the picture:", "--max-tokens", "32", "--threads", "1", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture()
def picture(tmp_path):
    path = tmp_path / "chart.png"
    path.write_bytes(png_bytes(32, 32, seed=5))
    return path


def test_the_same_text_with_every_draft_after_a_picture(capsys, tiny_vision, picture):
    target, _ = tiny_vision  # its projector lies beside it: found without --mmproj
    alone = generate(capsys, "--target", str(target), "--image", str(picture), "--draft", "none")
    plain = generate(capsys, "--target", str(target))
    assert alone["stats"]["prompt_tokens"] >= plain["stats"]["prompt_tokens"] + 16  # the picture's tokens
    for draft in ("lookup", "mtp"):
        fast = generate(capsys, "--target", str(target), "--image", str(picture), "--draft", draft, "--lookahead", "3")
        assert fast["tokens"] == alone["tokens"] and fast["text"] == alone["text"]
        if draft == "mtp":
            assert fast["stats"]["drafted"] > 0  # the head drafts after the picture


def test_mmproj_names_the_projector(capsys, tiny_vision, picture, tmp_path):
    target, projector = tiny_vision
    lone = tmp_path / "alone" / target.name
    lone.parent.mkdir()
    shutil.copy(target, lone)
    assert main(["generate", "x", "--target", str(lone), "--image", str(picture)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{lone.name} has no projector beside it (mmproj-*.gguf): give one with --mmproj FILE to send images")
    out = generate(capsys, "--target", str(lone), "--mmproj", str(projector), "--image", str(picture))
    assert out["stats"]["prompt_tokens"] > 16


@pytest.mark.parametrize("make,line", [
    (lambda d: d / "nope.png", "--image {p}: no such file"),
    (lambda d: (d / "x.bmp").write_bytes(png_bytes(8, 8, fmt="BMP")) and d / "x.bmp", "--image x.bmp is a BMP file; send PNG, JPEG or WebP"),
    (lambda d: (d / "n.png").write_bytes(b"not a picture") and d / "n.png", "--image n.png is not an image Tandem reads; send PNG, JPEG or WebP"),
])
def test_a_bad_image_is_one_line_before_any_model_loads(capsys, tmp_path, make, line):
    path = make(tmp_path)
    assert main(["generate", "x", "--target", str(tmp_path / "missing.gguf"), "--image", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tandem: error: {line.format(p=path)}"]


def test_race_takes_pictures_too(capsys, tiny_vision, picture):
    target, _ = tiny_vision
    assert main(["race", "Describe the picture:", "--target", str(target), "--image", str(picture), "--draft", "mtp",
                 "--max-tokens", "16", "--threads", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"]["tokens"] == out["speculative"]["tokens"]
    assert out["target"]["stats"]["prompt_tokens"] > 16
