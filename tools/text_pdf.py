"""A PDF with a real text layer, written object by object with pypdf: Helvetica lines, each its
own text-showing operator, on letter pages. The one writer of such PDFs for the tests
(tests/document_files.py: one line a page) and the Library quote suite (library_quote_suite/
writers.py: 48 wrapped lines a page); a PDF library that reads it finds exactly these lines.

May import: pypdf (the `docs` extra), nothing of engine/ or app/.
"""

from __future__ import annotations

from pathlib import Path

LETTER = (612, 792)  # points


def lines_pdf(path: Path, pages: list[list[str]], *, size: int = 12, leading: int = 0,
              at: tuple[int, int] = (72, 720)) -> Path:
    """`pages`, each a list of lines of Helvetica `size` pt starting at `at` (points from the
    bottom left), `leading` points apart (0: the page has one line and needs none)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    w = PdfWriter()
    font = w._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding")}))
    for lines in pages:
        page = w.add_blank_page(*LETTER)
        shown = " T* ".join(f"({_escape(line)}) Tj" for line in lines)
        spacing = f"{leading} TL " if leading else ""
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 {size} Tf {spacing}{at[0]} {at[1]} Td {shown} ET".encode("latin-1"))
        page[NameObject("/Contents")] = w._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject({
            NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    with open(path, "wb") as f:
        w.write(f)
    return path


def _escape(text: str) -> str:
    """A PDF string's own characters: backslash and parentheses."""
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
