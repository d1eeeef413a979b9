"""A document of blocks written as DOCX (python-docx), XLSX (openpyxl), PDF (pypdf, a real text
layer written by tools/text_pdf.py as the tests' PDFs are, one line per wrapped line),
HTML, Markdown or plain text: the formats an analyst's folder holds and the Library reads.

A block is ("title" | "heading" | "para" | "item" | "table", value); a table's value is its
rows, the first the header."""

from __future__ import annotations

import datetime as dt
import html
import textwrap
from pathlib import Path
from typing import Any

from ..text_pdf import lines_pdf

Blocks = list[tuple[str, Any]]
FIXED_TIME = dt.datetime(2025, 1, 6, 9, 0)  # document properties say this, not when the suite was written


def write_document(path: Path, blocks: Blocks) -> Path:
    ext = path.suffix.lstrip(".")
    {"docx": _docx, "xlsx": _xlsx, "pdf": _pdf, "html": _html, "md": _md, "txt": _txt}[ext](path, blocks)
    return path


def _docx(path: Path, blocks: Blocks) -> None:
    import docx

    d = docx.Document()
    d.core_properties.created = d.core_properties.modified = FIXED_TIME
    for kind, value in blocks:
        if kind == "title":
            d.add_heading(value, 1)
        elif kind == "heading":
            d.add_heading(value, 2)
        elif kind == "table":
            t = d.add_table(rows=len(value), cols=len(value[0]))
            for r, row in enumerate(value):
                for c, cell in enumerate(row):
                    t.cell(r, c).text = cell
        else:
            d.add_paragraph(value)
    d.save(path)


def _xlsx(path: Path, blocks: Blocks) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    wb.properties.created = wb.properties.modified = FIXED_TIME
    ws = wb.active
    ws.title = "Prices"
    for kind, value in blocks:
        if kind == "table":
            for row in value:
                ws.append(row)
    wb.save(path)


def _lines(blocks: Blocks) -> list[str]:
    """The document as plain lines (a table as tab-separated rows), blank lines between blocks."""
    out: list[str] = []
    for kind, value in blocks:
        if kind == "table":
            out += ["\t".join(row) for row in value]
        elif kind == "item":
            out.append(value)
            continue
        else:
            out.append(value.upper() if kind == "title" else value)
        out.append("")
    return out


def _pdf(path: Path, blocks: Blocks) -> None:
    """One page per 48 wrapped lines of Helvetica 11 pt, each line its own text-showing operator."""
    lines = [w for line in _lines(blocks) for w in (textwrap.wrap(line, 88) or [""])]
    lines_pdf(path, [lines[start:start + 48] for start in range(0, len(lines), 48)], size=11, leading=14, at=(56, 740))


def _html(path: Path, blocks: Blocks) -> None:
    parts, items = [], []
    for kind, value in blocks + [("end", None)]:
        if kind != "item" and items:
            parts.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
            items = []
        if kind == "title":
            parts.append(f"<h1>{html.escape(value)}</h1>")
        elif kind == "heading":
            parts.append(f"<h2>{html.escape(value)}</h2>")
        elif kind == "para":
            parts.append(f"<p>{html.escape(value)}</p>")
        elif kind == "item":
            items.append(value)
        elif kind == "table":
            rows = "".join("<tr>" + "".join(f"<t{'h' if r == 0 else 'd'}>{html.escape(c)}</t{'h' if r == 0 else 'd'}>"
                                            for c in row) + "</tr>" for r, row in enumerate(value))
            parts.append(f"<table>{rows}</table>")
    title = html.escape(blocks[0][1])
    path.write_text(f"<html><head><title>{title}</title></head><body>{''.join(parts)}</body></html>\n", encoding="utf-8")


def _md(path: Path, blocks: Blocks) -> None:
    out = []
    for kind, value in blocks:
        if kind == "title":
            out += [f"# {value}", ""]
        elif kind == "heading":
            out += [f"## {value}", ""]
        elif kind == "item":
            out.append(f"- {value}")
        elif kind == "table":
            out += ["| " + " | ".join(row) + " |" for row in value[:1]] + ["|" + "---|" * len(value[0])]
            out += ["| " + " | ".join(row) + " |" for row in value[1:]] + [""]
        else:
            out += [value, ""]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def _txt(path: Path, blocks: Blocks) -> None:
    path.write_text("\n".join(_lines(blocks)) + "\n", encoding="utf-8")
