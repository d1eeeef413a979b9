"""DOCX read as a stream (wordml.py) says what python-docx's object walk said: headings by
style name, list items, tabs and breaks, hyperlinks' text, merged table cells repeated, content
controls and tracked insertions left out, a document without styles plain; and it stops at its
markup bound, a cell spanning more columns than Word allows, and a DTD."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from document_files import memo_docx
from engine.documents import read_document, wordml
from engine.errors import DocumentError

pytest.importorskip("docx")

# Written into the body as Word writes it (python-docx has no API for these).
EXTRA = ('<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:hyperlink><w:r><w:t>link text</w:t></w:r></w:hyperlink>'
         '<w:r><w:t xml:space="preserve"> and </w:t><w:noBreakHyphen/><w:cr/><w:ptab/><w:br w:type="column"/>'
         '<w:t>more</w:t></w:r><w:ins><w:r><w:t>inserted</w:t></w:r></w:ins><w:r><w:t>bold</w:t></w:r></w:p>'
         '<w:sdt><w:sdtContent><w:p><w:r><w:t>in a content control</w:t></w:r></w:p></w:sdtContent></w:sdt>'
         '<w:p><w:pPr><w:pStyle w:val="NoSuchStyle"/></w:pPr><w:r><w:t>unknown style</w:t></w:r></w:p>'
         '<w:tbl><w:tblPr/><w:tblGrid/><w:tr><w:trPr><w:gridBefore w:val="1"/></w:trPr><w:tc><w:p><w:r><w:t>A'
         '</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>nested</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:tc>'
         '<w:tc><w:tcPr><w:gridSpan w:val="2"/><w:vMerge w:val="restart"/></w:tcPr><w:p><w:r><w:t>B</w:t></w:r>'
         '</w:p></w:tc></w:tr><w:tr><w:trPr><w:gridBefore w:val="1"/></w:trPr><w:tc><w:p><w:r><w:t>C</w:t></w:r>'
         '</w:p></w:tc><w:tc><w:tcPr><w:gridSpan w:val="2"/><w:vMerge/></w:tcPr><w:p/></w:tc></w:tr>'
         '<w:tr><w:tc><w:p><w:r><w:t>D|pipe</w:t></w:r></w:p><w:p><w:r><w:t>two</w:t></w:r></w:p></w:tc></w:tr></w:tbl>')

# python-docx 1.2's walk (the reader before wordml.py) gave exactly this for the document below.
EXPECTED = """# Report

## link text and -
\tmorebold

unknown style

| A | B | B |
|---|---|---|
| C | B | B |
| D\\|pipe two |  |  |

A paragraph\twith a tab
and a line break (a page break is nothing)

## Part one

- first item
- second item
1. numbered

| Region | Sales | Sales |
|---|---|---|
| North | Sales | Sales |
| South second line | 7 | 8 |"""
# Without a styles part python-docx found none of these styles: every paragraph plain.
PLAIN = re.sub(r"(?m)^(#+|-|1\.) ", "", EXPECTED).replace("item\n", "item\n\n")  # items apart: no list


def rich_docx(path: Path, styles: bool = True) -> Path:
    import docx
    from docx.enum.text import WD_BREAK

    d = docx.Document()
    d.add_heading("Report", 0)
    p = d.add_paragraph("A paragraph\twith a tab")
    p.add_run().add_break()
    p.add_run("and a line break (a page break is nothing)").add_break(WD_BREAK.PAGE)
    d.add_paragraph("   ")
    d.add_heading("Part one", 2)
    d.add_paragraph("first item", style="List Bullet")
    d.add_paragraph("second item", style="List Bullet 2")
    d.add_paragraph("numbered", style="List Number")
    t = d.add_table(rows=3, cols=3)
    for (r, c), v in {(0, 0): "Region", (0, 1): "Sales", (1, 0): "North", (2, 0): "South", (2, 1): "7",
                      (2, 2): "8"}.items():
        t.cell(r, c).text = v
    t.cell(2, 0).add_paragraph("second line")
    t.cell(0, 1).merge(t.cell(1, 2))
    d.save(path)
    with zipfile.ZipFile(path) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    body = parts["word/document.xml"].decode()
    at = body.index("</w:p>") + len("</w:p>")  # after the title
    parts["word/document.xml"] = (body[:at] + EXTRA + body[at:]).encode()
    if not styles:
        del parts["word/styles.xml"]
        parts["word/_rels/document.xml.rels"] = re.sub(rb'<Relationship [^>]*/styles" Target="styles.xml"/>', b"",
                                                       parts["word/_rels/document.xml.rels"])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in parts.items():
            z.writestr(n, data)
    return path


def test_the_stream_reads_what_python_docx_read(tmp_path):
    doc = read_document(rich_docx(tmp_path / "rich.docx"))
    assert doc.text == EXPECTED
    assert [s.title for s in doc.sections] == ["Report"]  # split before each top-level heading
    plain = read_document(rich_docx(tmp_path / "plain.docx", styles=False)).text
    assert plain == PLAIN


def test_a_docx_past_its_markup_bound_is_refused_in_one_line(tmp_path, monkeypatch):  # styles.xml too
    monkeypatch.setattr(wordml, "MAX_DOCX_TAGS", 20)
    with pytest.raises(DocumentError, match=r"^memo\.docx: its word/styles\.xml holds more than 20 XML tags, "
                                            r"more markup than Tandem reads: split the document$"):
        read_document(memo_docx(tmp_path / "memo.docx"))


@pytest.mark.parametrize("xml, says", [
    ('<w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val="1000000000"/></w:tcPr></w:tc></w:tr></w:tbl>',
     "a table cell spans 1,000,000,000 columns (Word allows 63)"),
    ('<w:tbl><w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr></w:tc></w:tr></w:tbl>', "no tr above topmost tr in w:tbl"),
])
def test_a_table_no_word_writes_is_one_line(tmp_path, xml, says):
    path = rich_docx(tmp_path / "t.docx")
    with zipfile.ZipFile(path) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    parts["word/document.xml"] = parts["word/document.xml"].replace(b"<w:body>", b"<w:body>" + xml.encode())
    with zipfile.ZipFile(path, "w") as z:
        for n, data in parts.items():
            z.writestr(n, data)
    with pytest.raises(DocumentError, match=rf"^t\.docx: not a readable DOCX file \({re.escape(says)}\)$"):
        read_document(path)


def test_a_dtd_is_refused_before_its_entities_grow(tmp_path):
    laughs = ('<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
              '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r>'
              '<w:t>&b;</w:t></w:r></w:p></w:body></w:document>')
    with zipfile.ZipFile(tmp_path / "dtd.docx", "w") as z:
        z.writestr("word/document.xml", laughs)
    with pytest.raises(DocumentError, match=r"^dtd\.docx: not a readable DOCX file \(word/document\.xml declares a "
                                            r"DTD, which Word documents do not\)$"):
        read_document(tmp_path / "dtd.docx")
