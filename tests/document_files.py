"""Small documents of every kind Tandem attaches, written by the same libraries that read them
(and a PDF written object by object with pypdf), for the CLI's and the app's tests."""

from __future__ import annotations

from pathlib import Path

FACT = "The secret colour of the project is teal."


def text_pdf(path: Path, pages: list[str]) -> Path:
    """A PDF whose pages carry `pages` as a real text layer (Helvetica, one line each)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    w = PdfWriter()
    font = w._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding")}))
    for text in pages:
        page = w.add_blank_page(612, 792)
        stream = DecodedStreamObject()
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = w._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject({
            NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    with open(path, "wb") as f:
        w.write(f)
    return path


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
