"""One PDF page as a picture for a person to look at: the app's source pane shows the page a
Library passage was cited from. PDFium (pypdfium2) renders it to fit the pane's width, bounded
in pixels so that a poster-sized or strangely narrow page cannot take the memory, as raw RGB
(the app makes a QImage of it; no PNG encoded and decoded again). A file that is gone, locked
or damaged, or a page it does not have, is one line (PageError), never a traceback.

PDFium is not thread-safe and the app renders on a worker thread while a request may render a
scan's pages (pdf_images.py): every use of it in this room holds PDFIUM_LOCK.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from .blocks import visible_name
from .images import ImageError
from .reader import MAX_DOCUMENT_BYTES

PDFIUM_LOCK = threading.Lock()
PAGE_MAX_WIDTH = 2400  # pixels: a wide pane on a 2x screen
PAGE_MAX_PIXELS = 6_000_000  # ~18 MB of RGB: a letter page 2100 px wide; a poster is rendered smaller
_MAX_SCALE = 300 / 72.0  # never above 300 dpi (a tiny page is not blown up into megapixels)


class PageError(ImageError):
    """A PDF page that cannot be shown: said in one line, with the file's name."""


@dataclass(frozen=True)
class PageImage:
    """Page `page` of `pages`, `width` x `height` pixels, rows of `stride` bytes of RGB."""

    page: int
    pages: int
    width: int
    height: int
    stride: int
    rgb: bytes


def page_scale(width_pt: float, height_pt: float, width_px: int) -> float:
    """The scale (pixels per point) that fits `width_px`, within PAGE_MAX_WIDTH, PAGE_MAX_PIXELS
    and 300 dpi."""
    if not (width_pt > 0 and height_pt > 0):
        raise ValueError("the page has no size")
    scale = min(max(1, min(width_px, PAGE_MAX_WIDTH)) / width_pt, _MAX_SCALE)
    if width_pt * height_pt * scale * scale > PAGE_MAX_PIXELS:
        scale = (PAGE_MAX_PIXELS / (width_pt * height_pt)) ** 0.5
    return scale


def render_page(path: str | os.PathLike[str], page: int, width_px: int) -> PageImage:
    """Page `page` (1-based) of the PDF at `path`, rendered `width_px` wide at most (see
    page_scale). PageError in one line when it cannot be."""
    name = visible_name(Path(path).name)
    try:
        size = Path(path).stat().st_size
    except OSError as e:
        raise PageError(f"{name}: cannot read it ({e.strerror or e})") from None
    if size > MAX_DOCUMENT_BYTES:
        raise PageError(f"{name}: {size / 1e6:.0f} MB is larger than Tandem opens "
                        f"({MAX_DOCUMENT_BYTES / 1e6:.0f} MB)")
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise PageError("showing a PDF's page needs pypdfium2: pip install 'tandem-studio[vision]'") from None
    with PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as e:
            if "password" in str(e).lower():
                raise PageError(f"{name}: the PDF is password-protected") from None
            raise PageError(f"{name}: not a PDF PDFium can show ({_said(e)})") from None
        except OSError as e:
            raise PageError(f"{name}: cannot read it ({e.strerror or e})") from None
        try:
            count = len(doc)
            if not 1 <= page <= count:
                raise PageError(f"{name}: no page {page} (it has {count})")
            return _render(doc[page - 1], page, count, width_px)
        except (pdfium.PdfiumError, ValueError) as e:
            raise PageError(f"{name}: page {page} cannot be shown ({_said(e)})") from None
        finally:
            doc.close()


def _render(pdf_page, page: int, count: int, width_px: int) -> PageImage:
    try:
        w_pt, h_pt = pdf_page.get_size()
        bitmap = pdf_page.render(scale=page_scale(w_pt, h_pt, width_px), rev_byteorder=True)  # RGB, not BGR
        try:
            return PageImage(page, count, bitmap.width, bitmap.height, bitmap.stride, bytes(bitmap.buffer))
        finally:
            bitmap.close()
    finally:
        pdf_page.close()


def _said(e: Exception) -> str:
    return str(e)[:80] or type(e).__name__
