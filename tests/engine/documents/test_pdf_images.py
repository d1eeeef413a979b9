"""A scanned PDF's pages as pictures (engine/documents/pdf_images.py): the pages without text
rendered by PDFium within size and count bounds, and each refusal one line; `tandem generate
--image scan.pdf` sends them as the pictures they are."""

from __future__ import annotations

import json

import pytest

from document_files import text_pdf
from engine.documents.images import ImageError, decode_image
from engine.documents.pdf_images import RENDER_SIDE, pages_without_text, pdf_page_images
from image_files import scanned_pdf_with_pictures

pytest.importorskip("pypdfium2")


def test_a_scanned_pdfs_pages_become_pictures_no_larger_than_the_render_side(tmp_path):
    scan = scanned_pdf_with_pictures(tmp_path / "scan.pdf", pages=2, width=200, height=900)
    assert pages_without_text(scan) == [1, 2]
    pictures = pdf_page_images(scan)
    assert [p.name for p in pictures] == ["scan.pdf, page 1", "scan.pdf, page 2"]
    first = decode_image(pictures[0])
    assert first.format == "PNG" and first.height == RENDER_SIDE and 340 <= first.width <= 370  # the page's shape
    assert pictures[0].sha256 != pictures[1].sha256  # two different pages
    assert pdf_page_images(scan, [2])[0].sha256 == pictures[1].sha256  # rendering is repeatable: cached by content


def test_only_the_pages_without_text_and_one_line_for_each_refusal(tmp_path):
    from pypdf import PdfWriter

    mixed = PdfWriter()
    for part in (text_pdf(tmp_path / "t.pdf", ["A page of text"]), scanned_pdf_with_pictures(tmp_path / "s.pdf", 1)):
        mixed.append(str(part))
    with open(tmp_path / "mixed.pdf", "wb") as f:
        mixed.write(f)
    assert pages_without_text(tmp_path / "mixed.pdf") == [2]
    assert [p.name for p in pdf_page_images(tmp_path / "mixed.pdf")] == ["mixed.pdf, page 2"]

    def refused(path, *args, **kw) -> str:
        with pytest.raises(ImageError) as e:
            pdf_page_images(path, *args, **kw)
        line = str(e.value)
        assert "\n" not in line and "Traceback" not in line
        return line

    assert refused(tmp_path / "t.pdf") == "t.pdf: every page has a text layer: attach it as a document to send its text"
    many = scanned_pdf_with_pictures(tmp_path / "many.pdf", pages=5, width=20, height=20)
    assert refused(many, max_images=4) == ("many.pdf: 5 pages without text; at most 4 pictures go in one request: "
                                           "split the PDF")
    assert refused(many, [9]) == "many.pdf: no page 9 (it has 5)"
    (tmp_path / "junk.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 200)
    assert refused(tmp_path / "junk.pdf").startswith("junk.pdf: not a readable PDF")
    locked = PdfWriter()
    locked.append(str(scanned_pdf_with_pictures(tmp_path / "l.pdf", 1)))
    locked.encrypt("secret")
    with open(tmp_path / "locked.pdf", "wb") as f:
        locked.write(f)
    assert refused(tmp_path / "locked.pdf") == "locked.pdf: the PDF is password-protected; save an unlocked copy"
    assert refused(tmp_path / "none.pdf").startswith("none.pdf: cannot read")


def test_generate_sends_a_scanned_pdfs_pages_as_its_pictures(capsys, tiny_vision, tmp_path):
    from engine import Engine
    from engine.cli.main import main

    target, projector = tiny_vision
    scan = scanned_pdf_with_pictures(tmp_path / "scan.pdf", pages=2, width=24, height=24)
    assert main(["generate", "Describe the pages:", "--target", str(target), "--image", str(scan), "--draft", "mtp",
                 "--max-tokens", "12", "--threads", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    eng = Engine(target, mmproj=projector, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    try:
        alone = eng.generate("Describe the pages:", images=list(pdf_page_images(scan)), max_tokens=12)
    finally:
        eng.close()
    assert out["tokens"] == alone.tokens and out["stats"]["prompt_tokens"] == alone.stats.prompt_tokens
    text = tmp_path / "t.pdf"
    text_pdf(text, ["words"])
    assert main(["generate", "x", "--target", str(target), "--image", str(text)]) == 2
    assert capsys.readouterr().err.strip() == ("tandem: error: --image t.pdf: every page has a text layer: attach "
                                               "it as a document to send its text")
