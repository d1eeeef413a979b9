"""Small pictures for the vision tests, written with Pillow (random pixels from a seed)."""

from __future__ import annotations

import io


def png_bytes(width: int = 32, height: int = 32, seed: int = 0, fmt: str = "PNG") -> bytes:
    """A `width` x `height` picture of random colours, as `fmt` (PNG, JPEG, WEBP, BMP, GIF) bytes."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, fmt)
    return buf.getvalue()


def scanned_pdf_with_pictures(path, pages: int = 2, width: int = 200, height: int = 300):
    """A PDF whose `pages` pages are pictures only (no text layer): what a scanner without OCR
    makes, each page a `width` x `height` point image."""
    from PIL import Image

    frames = [Image.open(io.BytesIO(png_bytes(width, height, seed=n))).convert("RGB") for n in range(pages)]
    frames[0].save(path, "PDF", save_all=True, append_images=frames[1:], resolution=72.0)
    return path
