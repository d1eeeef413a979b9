"""A scanned PDF's pages as pictures, for a target that sees.

A PDF without a text layer (a scan, a photographed form, slides exported as images) has nothing
for the text reader (`reader.py` refuses it), but a model with a vision projector can read its
pages. Each page without text is rendered with PDFium (pypdfium2: PDFium's own renderer, no
external programs) to a PNG no larger than RENDER_SIDE pixels on its long side, named
"scan.pdf, page 3". Bounded like every input: the pages a request may carry (MAX_IMAGES), the
pixels a page may have, and the time rendering may take; a locked or damaged PDF is one line.
PDFium is used under pdf_page.PDFIUM_LOCK (it is not thread-safe).
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

from .images import MAX_IMAGES, ImageError, ImageInput, check_bytes
from .model import Refused
from .reader import MAX_DOCUMENT_BYTES
from .blocks import visible_name
from .pdf_page import PDFIUM_LOCK

RENDER_SIDE = 1600  # pixels on a page's long side: a letter page at ~145 dpi, small print still legible
RENDER_SECONDS = 60.0  # rendering every page asked for; a PDF that takes longer is refused
_POINTS_PER_INCH = 72.0


def pages_without_text(path: str | os.PathLike[str]) -> list[int]:
    """The 1-based numbers of the PDF's pages that have no text layer (all of a scanned PDF)."""
    from .pdf import pdf_pages

    try:
        pages, locked = pdf_pages(str(path))
    except Refused as e:
        raise ImageError(f"{visible_name(Path(path).name)}: {e}") from None
    except Exception as e:  # noqa: BLE001 - a damaged file is the user's input, said in one line
        raise ImageError(f"{visible_name(Path(path).name)}: not a readable PDF ({str(e)[:80] or type(e).__name__})") \
            from None
    if locked:
        raise ImageError(f"{visible_name(Path(path).name)}: the PDF is password-protected; save an unlocked copy")
    return [n for n, s in enumerate(pages, 1) if not s.text]


def pdf_page_images(path: str | os.PathLike[str], pages: list[int] | None = None, *,
                    max_images: int = MAX_IMAGES) -> tuple[ImageInput, ...]:
    """The PDF's pages as PNG pictures: `pages` (1-based), or else every page without a text
    layer. ImageError in one line when there are none, more than `max_images`, or the file
    cannot be rendered."""
    name = visible_name(Path(path).name)
    try:
        size = Path(path).stat().st_size
    except OSError as e:
        raise ImageError(f"{name}: cannot read ({e.strerror or e})") from None
    if size > MAX_DOCUMENT_BYTES:
        raise ImageError(f"{name}: {size / 1e6:.0f} MB is too large (a PDF is at most {MAX_DOCUMENT_BYTES / 1e6:.0f} MB)")
    wanted = pages_without_text(path) if pages is None else list(pages)
    if not wanted:
        raise ImageError(f"{name}: every page has a text layer: attach it as a document to send its text")
    if len(wanted) > max_images:
        raise ImageError(f"{name}: {len(wanted)} pages without text; at most {max_images} pictures go in one "
                         "request: split the PDF")
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise ImageError("reading a scanned PDF's pages needs pypdfium2: pip install 'tandem-studio[vision]'") \
            from None
    with PDFIUM_LOCK:  # PDFium is not thread-safe: the app's source pane may be rendering a page
        return _render_pages(pdfium, path, name, wanted)


def _render_pages(pdfium, path: str | os.PathLike[str], name: str, wanted: list[int]) -> tuple[ImageInput, ...]:
    deadline = time.monotonic() + RENDER_SECONDS
    out = []
    try:
        doc = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as e:
        raise ImageError(f"{name}: not a PDF PDFium can render ({str(e)[:80]})") from None
    try:
        count = len(doc)
        for n in wanted:
            if not 1 <= n <= count:
                raise ImageError(f"{name}: no page {n} (it has {count})")
            if out and time.monotonic() > deadline:
                raise ImageError(f"{name}: rendering its pages took over {RENDER_SECONDS:.0f} s (stopped at page {n})")
            out.append(_render(doc[n - 1], f"{name}, page {n}"))
    except pdfium.PdfiumError as e:
        raise ImageError(f"{name}: a page PDFium cannot render ({str(e)[:80]})") from None
    finally:
        doc.close()
    return tuple(out)


def _render(page, name: str) -> ImageInput:
    """One page as a PNG at most RENDER_SIDE pixels on its long side."""
    try:
        w_pt, h_pt = page.get_size()
        long_side = max(w_pt, h_pt)
        if not long_side > 0:
            raise ImageError(f"{name} has no size")
        scale = min(RENDER_SIDE / long_side, 300 / _POINTS_PER_INCH)  # never above 300 dpi
        bitmap = page.render(scale=scale)
        try:
            picture = bitmap.to_pil()
            buf = io.BytesIO()
            picture.save(buf, format="PNG", optimize=False)
        finally:
            bitmap.close()
    finally:
        page.close()
    image = ImageInput(buf.getvalue(), name=name)
    check_bytes(image)
    return image
