"""One PDF page as a picture for the app's source pane (engine/documents/pdf_page.py): the page
asked for, fitted to a width, bounded in pixels however large or narrow the page, and a file
that is gone, locked, damaged or short of that page refused in one line with its name."""

from __future__ import annotations

import pytest

from document_files import text_pdf
from engine.documents.pdf_page import PAGE_MAX_PIXELS, PageError, page_scale, render_page

pytest.importorskip("pypdfium2")
pytest.importorskip("pypdf")

PAGES = ["Alpha", "Bravo bravo bravo bravo bravo bravo bravo", "Charlie charlie"]


def _dark(image) -> int:
    """How many bytes of the page are ink (the page is white, the text black)."""
    return sum(1 for b in image.rgb if b < 128)


def test_the_page_asked_for_fitted_to_the_width(tmp_path):
    pdf = text_pdf(tmp_path / "report.pdf", PAGES)
    pages = [render_page(pdf, n, 600) for n in (1, 2, 3)]
    second = pages[1]
    assert (second.page, second.pages, second.width) == (2, 3, 600)
    assert abs(second.height - 600 * 792 / 612) <= 1 and second.stride >= 3 * second.width
    assert len(second.rgb) == second.stride * second.height
    ink = [_dark(p) for p in pages]
    assert all(n > 0 for n in ink) and ink[1] > ink[2] > ink[0]  # each page its own line, longest on page 2
    assert render_page(pdf, 2, 600).rgb == second.rgb  # repeatable


def test_a_large_or_narrow_page_is_bounded_in_pixels(tmp_path):
    from pypdf import PdfWriter

    w = PdfWriter()
    w.add_blank_page(14400, 14400)  # 200 x 200 inches, PDF's largest
    w.add_blank_page(20, 14400)  # a strip
    with open(tmp_path / "poster.pdf", "wb") as f:
        w.write(f)
    for n in (1, 2):
        image = render_page(tmp_path / "poster.pdf", n, 2400)
        assert image.width * image.height <= PAGE_MAX_PIXELS * 1.01
    assert page_scale(612, 792, 100_000) * 612 <= 2400  # the width itself is capped
    assert page_scale(72, 72, 2400) == pytest.approx(300 / 72)  # a one-inch page: 300 dpi, not blown up


@pytest.mark.parametrize("make, says", [
    (lambda p: None, "cannot read it"),
    (lambda p: p.write_bytes(b"%PDF-1.4 not really"), "not a PDF PDFium can show"),
    ("locked", "password-protected"),
    ("short", "no page 2 (it has 1)"),
])
def test_what_cannot_be_shown_is_one_line_with_the_files_name(tmp_path, make, says):
    pdf = tmp_path / "report.pdf"
    if make == "locked":
        from pypdf import PdfWriter

        w = PdfWriter(clone_from=str(text_pdf(tmp_path / "open.pdf", PAGES)))
        w.encrypt("secret", algorithm="RC4-128")
        w.write(pdf)
    elif make == "short":
        text_pdf(pdf, ["Only page"])
    else:
        make(pdf)
    with pytest.raises(PageError) as e:
        render_page(pdf, 2, 400)
    line = str(e.value)
    assert line.startswith("report.pdf: ") and says in line and "\n" not in line
