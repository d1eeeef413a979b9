"""Office documents: DOCX paragraphs and tables in order (wordml.py, a stream of its XML),
XLSX and ODS sheets as Markdown tables (openpyxl, odfpy), PPTX slides (python-pptx)."""

from __future__ import annotations

from .model import Section, markdown_sections, markdown_table

MAX_SHEET_ROWS = 5000  # a sheet longer than this is cut (and says so): a prompt, not a database


def docx_sections(path: str) -> list[Section]:
    """Headings become Markdown headings, list paragraphs items, tables Markdown tables; the
    document is split before each of its top-level headings (read as a stream: wordml.py)."""
    from .wordml import docx_blocks

    text = docx_blocks(path)
    return markdown_sections(text) if text else []


def xlsx_sheets(path: str) -> list[Section]:
    from openpyxl import load_workbook

    wb = load_workbook(path, read_only=True, data_only=True)
    try:
        sheets = []
        for ws in wb.worksheets:
            rows: list[list[object]] = []
            for row in ws.iter_rows(values_only=True):
                rows.append(list(row))
                if len(rows) > MAX_SHEET_ROWS:
                    break
            sheets.append(_sheet(ws.title, rows))
        return [s for s in sheets if s.text]
    finally:
        wb.close()


def ods_sheets(path: str) -> list[Section]:
    from odf.opendocument import load
    from odf.table import Table, TableCell, TableRow
    from odf import teletype

    doc = load(path)
    sheets = []
    for table in doc.spreadsheet.getElementsByType(Table):
        rows: list[list[object]] = []
        for row in table.getElementsByType(TableRow):
            cells: list[object] = []
            for cell in row.getElementsByType(TableCell):
                text = teletype.extractText(cell).strip()
                repeat = int(cell.getAttribute("numbercolumnsrepeated") or 1)
                cells.extend([text] * (repeat if text else min(repeat, 64)))  # empty runs pad the sheet's width
            repeat = int(row.getAttribute("numberrowsrepeated") or 1)
            rows.extend([cells] * (repeat if any(cells) else min(repeat, 2)))
            if len(rows) > MAX_SHEET_ROWS:
                break
        sheets.append(_sheet(table.getAttribute("name") or f"Sheet {len(sheets) + 1}", rows))
    return [s for s in sheets if s.text]


def _sheet(name: str, rows: list[list[object]]) -> Section:
    cut = len(rows) > MAX_SHEET_ROWS
    table = markdown_table(rows[:MAX_SHEET_ROWS])
    if not table:
        return Section(name, "")
    note = f"\n\n(the first {MAX_SHEET_ROWS:,} rows)" if cut else ""
    return Section(f"Sheet {name}", f"## Sheet: {name}\n\n{table}{note}")


def pptx_slides(path: str) -> list[Section]:
    from pptx import Presentation

    slides = []
    for n, slide in enumerate(Presentation(path).slides, 1):
        parts: list[str] = []
        for shape in slide.shapes:
            if getattr(shape, "has_table", False) and shape.has_table:
                table = markdown_table([[c.text for c in row.cells] for row in shape.table.rows])
                if table:
                    parts.append(table)
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                text = shape.text_frame.text.strip()
                if text:
                    parts.append(text)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                parts.append(f"Notes: {notes}")
        slides.append(Section(f"Slide {n}", f"## Slide {n}\n\n" + "\n\n".join(parts) if parts else ""))
    return [s for s in slides if s.text]
