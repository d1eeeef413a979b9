"""Small documents of every kind Tandem attaches, written by the same libraries that read them
(and a PDF written object by object with pypdf: tools/text_pdf.py), for the CLI's and the app's tests."""

from __future__ import annotations

from pathlib import Path

from tools.text_pdf import lines_pdf

FACT = "The secret colour of the project is teal."


def text_pdf(path: Path, pages: list[str]) -> Path:
    """A PDF whose pages carry `pages` as a real text layer (Helvetica, one line each)."""
    return lines_pdf(path, [[text] for text in pages])


def scanned_pdf(path: Path) -> Path:
    """A PDF of a page with no text layer (what a scanner without OCR makes)."""
    from pypdf import PdfWriter

    w = PdfWriter()
    w.add_blank_page(612, 792)
    with open(path, "wb") as f:
        w.write(f)
    return path


def memo_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Memo", 1)
    d.add_paragraph(FACT)
    t = d.add_table(rows=2, cols=2)
    for (r, c), v in {(0, 0): "Region", (0, 1): "Sales", (1, 0): "North", (1, 1): "42"}.items():
        t.cell(r, c).text = v
    d.save(path)
    return path


def page_html(path: Path) -> Path:
    path.write_text(f"<html><head><title>Page</title><script>hidden()</script></head><body>"
                    f"<h1>Notes</h1><p>{FACT}</p><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr>"
                    f"</table></body></html>", encoding="utf-8")
    return path


def budget_xlsx(path: Path) -> Path:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Item", "Cost"])
    ws.append(["Teal paint", 12])
    wb.save(path)
    return path


def slides_pptx(path: Path) -> Path:
    from pptx import Presentation

    p = Presentation()
    s = p.slides.add_slide(p.slide_layouts[1])
    s.shapes.title.text = "Plan"
    s.placeholders[1].text = FACT
    p.save(path)
    return path


def sheet_ods(path: Path) -> Path:
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    doc = OpenDocumentSpreadsheet()
    table = Table(name="Costs")
    for row in (["Item", "Cost"], ["Teal paint", "12"]):
        tr = TableRow()
        for v in row:
            cell = TableCell()
            cell.addElement(P(text=v))
            tr.addElement(cell)
        table.addElement(tr)
    doc.spreadsheet.addElement(table)
    doc.save(str(path))
    return path


def book_epub(path: Path) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" '
                   'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
                   'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
                   'version="3.0"><manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>'
                   '<item id="c2" href="c2.xhtml" media-type="application/xhtml+xml"/></manifest>'
                   '<spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>')
        z.writestr("OEBPS/c1.xhtml", "<html><body><h1>One</h1><p>First chapter.</p></body></html>")
        z.writestr("OEBPS/c2.xhtml", f"<html><body><h1>Two</h1><p>{FACT}</p></body></html>")
    return path


def note_rtf(path: Path) -> Path:
    path.write_bytes(b"{\\rtf1\\ansi{\\fonttbl\\f0\\fswiss Helvetica;}\\f0\\pard " + FACT.encode() + b"\\par}")
    return path


WRITERS = {"pdf": lambda p: text_pdf(p, [FACT]), "docx": memo_docx, "html": page_html, "xlsx": budget_xlsx,
           "pptx": slides_pptx, "ods": sheet_ods, "epub": book_epub, "rtf": note_rtf}


# -- zip bombs, written the way they are made: one compressed block repeated ----------------------
PARAGRAPH = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"


def _deflated(data: bytes, last: bool) -> bytes:
    """`data` as raw deflate blocks that refer to nothing before them (so they can be repeated)."""
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH)


def raw_zip(path: Path, members: list[tuple[str, list[tuple[bytes, int]], int | None]]) -> Path:
    """A zip written by hand: each member is (name, [(plain piece, times)], declared size or
    None for its true size). The pieces are deflated once and their blocks repeated, so a
    member inflating to gigabytes costs a few MB and a CRC pass (a declared size other than
    the true one is a header that lies)."""
    import struct
    import zlib

    central, offset = [], 0
    with open(path, "wb") as f:
        for name, pieces, declared in members:
            crc, size, blocks = 0, 0, []
            for i, (plain, times) in enumerate(pieces):
                block = _deflated(plain, last=i == len(pieces) - 1)
                blocks.append((block, times))
                for _ in range(times):
                    crc = zlib.crc32(plain, crc)
                size += len(plain) * times
            packed = sum(len(b) * t for b, t in blocks)
            size = size if declared is None else declared
            raw = name.encode()
            fields = struct.pack("<HHHHHIIIHH", 20, 0, 8, 0, 33, crc, packed, size, len(raw), 0)
            f.write(b"PK\x03\x04" + fields + raw)
            for block, times in blocks:
                for _ in range(times):
                    f.write(block)
            central.append(b"PK\x01\x02" + struct.pack("<H", 20) + fields + struct.pack("<HHHII", 0, 0, 0, 0, offset)
                           + raw)
            offset = f.tell()
        directory = b"".join(central)
        f.write(directory + b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, len(central), len(central), len(directory),
                                                        offset, 0))
    return path


def bomb_docx(path: Path, inflated: int, declared: int | None = None) -> Path:
    """A DOCX (the parts python-docx writes) whose word/document.xml inflates to about
    `inflated` bytes of empty paragraphs; `declared`: the size its headers claim instead."""
    return _docx_of(path, PARAGRAPH * (1024 * 1024 // len(PARAGRAPH)), inflated, declared)


def long_docx(path: Path, inflated: int, markup: bool = False) -> Path:
    """A DOCX inside the zip limits (its XML compresses ~15x, as text does) whose
    word/document.xml is about `inflated` bytes of short paragraphs of words; with `markup`,
    of empty paragraphs carrying random revision ids (~4x: tags without text)."""
    import random

    r = random.Random(1)
    words = ["alpha", "beta", "gamma", "delta", "report", "budget", "project", "teal"]
    para = ((lambda: f'<w:p w:rsidR="{r.getrandbits(32):08X}"/>') if markup else
            (lambda: "<w:p><w:r><w:t>" + " ".join(r.choice(words) for _ in range(3)) + "</w:t></w:r></w:p>"))
    chunk = "".join(para() for _ in range(1024 * 1024 // (26 if markup else 40)))
    return _docx_of(path, chunk.encode(), inflated, None)


def _docx_of(path: Path, chunk: bytes, inflated: int, declared: int | None) -> Path:
    import zipfile

    memo = memo_docx(path.with_name(path.stem + "-memo.docx"))
    with zipfile.ZipFile(memo) as z:
        parts = [(n, [(z.read(n), 1)], None) for n in z.namelist() if n != "word/document.xml"]
    body = [(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="http://schemas.'
             b'openxmlformats.org/wordprocessingml/2006/main"><w:body>', 1),
            (chunk, max(1, inflated // len(chunk))), (b"</w:body></w:document>", 1)]
    return raw_zip(path, parts + [("word/document.xml", body, declared)])


def many_parts_zip(path: Path, parts: int, first: tuple[str, bytes] = ("mimetype", b"application/epub+zip")) -> Path:
    """A zip of `parts` tiny members (the first one `first`): too many parts for any document."""
    return raw_zip(path, [(first[0], [(first[1], 1)], None)] + [(f"x/{i}", [(b"", 1)], None) for i in range(parts - 1)])
