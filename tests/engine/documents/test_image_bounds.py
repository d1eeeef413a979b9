"""Pictures are bounded before they are decoded: bytes, format, pixels, each refused in one line."""

from __future__ import annotations

import struct
import zlib

import pytest

from engine.documents.images import (ImageError, ImageInput, check_images, decode_image, image_format, image_size)
from image_files import png_bytes


def _png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose header claims `width` x `height` (a decompression bomb's shape)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_the_three_formats_decode_to_rgb(fmt):
    img = decode_image(ImageInput(png_bytes(24, 16, fmt=fmt)))
    assert (img.width, img.height, img.format) == (24, 16, fmt)
    assert len(img.rgb) == 24 * 16 * 3


def test_the_content_hash_names_the_picture():
    a, b = ImageInput(png_bytes(seed=1)), ImageInput(png_bytes(seed=1))
    assert a.sha256 == b.sha256 and len(a.sha256) == 64
    assert ImageInput(png_bytes(seed=2)).sha256 != a.sha256


@pytest.mark.parametrize("fmt,word", [("BMP", "a BMP file"), ("GIF", "a GIF file")])
def test_other_formats_are_refused_in_one_line(fmt, word):
    with pytest.raises(ImageError) as e:
        check_images([png_bytes(8, 8, fmt=fmt)])
    assert str(e.value) == f"image 1 is {word}; send PNG, JPEG or WebP"


def test_bytes_that_are_no_image_are_refused():
    with pytest.raises(ImageError, match=r"^image 1 is not an image Tandem reads; send PNG, JPEG or WebP$"):
        check_images([b"hello, world"])
    assert image_format(b"hello") == ""


def test_too_many_bytes_are_refused_before_decoding():
    with pytest.raises(ImageError, match=r"^big\.png is 2\.0 MB; images are limited to 1 MB$"):
        decode_image(ImageInput(b"\x89PNG\r\n\x1a\n" + b"\0" * 1_999_992, name="big.png"), max_bytes=1_000_000)


def test_a_picture_claiming_too_many_pixels_is_refused_before_decoding():
    big = ImageInput(_png_claiming(8000, 8000), name="big.png")
    assert len(big.data) < 200
    with pytest.raises(ImageError) as e:
        decode_image(big)
    assert str(e.value) == "big.png is 8000 x 8000 pixels; images are limited to 50 megapixels"
    with pytest.raises(ImageError) as e:  # past Pillow's own guard, which stops it at the header
        decode_image(ImageInput(_png_claiming(100_000, 100_000), name="bomb.png"))
    assert str(e.value) == "bomb.png claims more pixels than an image may have"
    with pytest.raises(ImageError, match="limited to 0 megapixels"):
        decode_image(ImageInput(png_bytes(40, 40)), max_pixels=1000)


def test_a_damaged_file_is_one_line():
    data = png_bytes(32, 32)
    with pytest.raises(ImageError) as e:
        decode_image(ImageInput(data[:60], name="cut.png"))
    assert str(e.value).startswith("cut.png is a damaged PNG file (") and "\n" not in str(e.value)


def test_the_size_alone_is_read_within_the_same_bounds_without_decoding():
    """What a picture held for later is checked by (the app's attachments, a chat archive)."""
    assert image_size(ImageInput(png_bytes(24, 16, fmt="WEBP"))) == (24, 16)
    with pytest.raises(ImageError, match=r"^big\.png is 8000 x 8000 pixels; images are limited to 50 megapixels$"):
        image_size(ImageInput(_png_claiming(8000, 8000), name="big.png"))
    with pytest.raises(ImageError, match=r"^x is a GIF file; send PNG, JPEG or WebP$"):
        image_size(ImageInput(png_bytes(8, 8, fmt="GIF"), name="x"))
    with pytest.raises(ImageError) as e:
        image_size(ImageInput(b"\x89PNG\r\n\x1a\n" + b"\0" * 30, name="cut.png"))
    assert str(e.value).startswith("cut.png is a damaged PNG file (") and "object at 0x" not in str(e.value)


def test_images_must_be_a_list():
    with pytest.raises(ImageError, match="must be a list"):
        check_images(png_bytes())
    with pytest.raises(ImageError, match="at most 2"):
        check_images([png_bytes()] * 3, max_images=2)
