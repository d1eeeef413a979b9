"""Reports out: an answer or a whole conversation as Markdown, HTML, PDF or Word (DOCX), and
as rich text on the clipboard for pasting into Word or mail.

What goes in the file is the answer as written, rendered: its headings keep their levels,
its tables stay tables, its code stays monospace. The app's chrome stays out: no "Assistant"
heading above an answer, no "(stopped by you)", no speed footer. HTML and PDF come from Qt's
own rendering of the Markdown (QTextDocument, QPdfWriter); DOCX is written with python-docx
from the same rendered document, block by block, so the four formats agree.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from PySide6.QtCore import QMimeData
from PySide6.QtGui import QColor, QFont, QPageSize, QPdfWriter, QTextBlock, QTextBlockFormat, QTextCursor, \
    QTextDocument, QTextFormat, QTextListFormat, QTextTable

from ...history import Message, calls_markdown, close_open_fence, references_markdown
from ...history.markdown import pictures_markdown
from ..attachments.attachments import split_attachments

FORMATS = {".md": "Markdown", ".docx": "Word", ".pdf": "PDF", ".html": "HTML"}
FILTERS = "Markdown (*.md);;Word document (*.docx);;PDF (*.pdf);;Web page (*.html)"
ARCHIVE = ".json"  # a whole chat as Tandem's JSON, to import again (app/history/archive.py): not a report
CHAT_FILTERS = FILTERS + ";;Tandem chat, to import again (*.json)"
NAME_BYTES = 200  # a file name from a title (file systems allow 255 bytes; room for " - answer.docx")
_MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML


class ExportError(ValueError):
    """A report that cannot be written; one line for the user."""


# -- Markdown --------------------------------------------------------------------------------
def answer_markdown(m: Message) -> str:
    """An answer as its author wrote it (an open code fence closed), with the Library sources it
    cites as references (Sources, numbered as cited), nothing else around it."""
    return "\n".join([close_open_fence(m.content).strip(), *references_markdown(m)]) + "\n"


def conversation_markdown(title: str, messages: Sequence[Message], system: str = "") -> str:
    """The chat as a report: its title, then each question (quoted, with the names of its
    attached files) and its answer as written, separated by rules."""
    out = [f"# {title}", ""]
    if system:
        out += [f"*System prompt:* {' '.join(system.split())}", ""]
    for m in messages:
        if m.role == "user":
            typed, files = split_attachments(m.content, m.spans)
            pictures = pictures_markdown(m)
            out += ["---", ""]
            out += ["> " + line if line else ">" for line in
                    (typed or ("(files only)" if files else "(pictures only)" if pictures else "")).split("\n")]
            if files:
                out += [">", "> *Attached: " + ", ".join(name for name, _ in files) + "*"]
            out += [line for p in pictures for line in (">", "> " + p)]
            out.append("")
        elif m.role == "assistant" and (m.content.strip() or m.tool_calls):
            out += calls_markdown(m.tool_calls)
            out += [close_open_fence(m.content).strip(), *references_markdown(m), ""] if m.content.strip() else []
    return "\n".join(out).rstrip() + "\n"


def whole_words(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters between words (a single longer word is cut)."""
    if len(text) <= limit:
        return text
    head = text[:limit + 1]
    return (head.rsplit(None, 1)[0] if len(head.split()) > 1 else text[:limit]).rstrip(" ,;:-")


def file_name(title: str, suffix: str = ".md") -> str:
    """A chat title as a file name: characters file systems refuse become "-", runs of space
    one space, and a title too long for a file name (NAME_BYTES in UTF-8) is cut between words."""
    name = "".join("-" if c in '/\\:*?"<>|' or ord(c) < 32 else c for c in title)
    name = " ".join(name.split()).strip(" .")
    while len(name.encode("utf-8")) > NAME_BYTES:
        name = whole_words(name, len(name) - 1).strip(" .")
    return (name or "conversation") + suffix


# -- rendered: HTML, PDF, clipboard ------------------------------------------------------------
def rendered(markdown: str) -> QTextDocument:
    """The Markdown rendered by Qt, code blocks in a monospace font on a light tint."""
    doc = QTextDocument()
    doc.setMarkdown(markdown, _MARKDOWN)
    cursor = QTextCursor(doc)
    b = doc.begin()
    while b.isValid():
        if _is_code(b):
            cursor.setPosition(b.position())
            fmt = QTextBlockFormat()
            fmt.setBackground(QColor(240, 240, 240))
            cursor.mergeBlockFormat(fmt)
        b = b.next()
    return doc


def to_html(markdown: str, title: str) -> str:
    html = rendered(markdown).toHtml()
    safe = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return html.replace("<head>", f'<head><meta charset="utf-8"><title>{safe}</title>', 1)


def write_pdf(markdown: str, path: str, title: str) -> None:
    writer = QPdfWriter(path)
    writer.setPageSize(QPageSize(QPageSize.PageSizeId.A4))
    writer.setTitle(title)
    writer.setCreator("Tandem")
    doc = rendered(markdown)
    doc.print_(writer)


def rich_mime(markdown: str, plain: str) -> QMimeData:
    """HTML for Word and mail, plain text for everything else."""
    mime = QMimeData()
    mime.setHtml(rendered(markdown).toHtml())
    mime.setText(plain)
    return mime


# -- DOCX ------------------------------------------------------------------------------------
def _is_code(b: QTextBlock) -> bool:
    f = b.blockFormat()
    return f.hasProperty(QTextFormat.Property.BlockCodeFence) or f.hasProperty(QTextFormat.Property.BlockCodeLanguage)


def _runs(paragraph, block: QTextBlock, code: bool = False) -> None:
    it = block.begin()
    while not it.atEnd():
        frag = it.fragment()
        it += 1
        text = frag.text().replace("\u2028", "\n")
        if not text:
            continue
        f = frag.charFormat()
        run = paragraph.add_run(text)
        run.bold = f.fontWeight() >= QFont.Weight.DemiBold.value or None
        run.italic = f.fontItalic() or None
        run.underline = f.fontUnderline() or None
        if code or f.fontFixedPitch() or f.font().family().lower() in ("monospace", "courier", "courier new"):
            run.font.name = "Courier New"


def _table(docx_doc, table: QTextTable) -> None:
    rows, cols = table.rows(), table.columns()
    out = docx_doc.add_table(rows=rows, cols=cols)
    out.style = "Table Grid"
    for r in range(rows):
        for c in range(cols):
            cell = table.cellAt(r, c)
            cursor = cell.firstCursorPosition()
            cursor.setPosition(cell.lastCursorPosition().position(), QTextCursor.MoveMode.KeepAnchor)
            para = out.cell(r, c).paragraphs[0]
            run = para.add_run(cursor.selectedText().replace("\u2029", "\n"))
            if r == 0:
                run.bold = True


def write_docx(markdown: str, path: str, title: str) -> None:
    """The rendered Markdown as a Word document: headings as Word headings (so they are in
    its navigation pane), lists as list paragraphs, code in Courier New, tables as tables."""
    try:
        import docx
        from docx.shared import Pt
    except ImportError:
        raise ExportError("a Word export needs python-docx (pip install 'tandem-studio[docs]')") from None
    out = docx.Document()
    out.core_properties.title = title
    source = rendered(markdown)  # held while its frames are walked
    it = source.rootFrame().begin()
    while not it.atEnd():
        frame, block = it.currentFrame(), it.currentBlock()
        it += 1
        if isinstance(frame, QTextTable):
            _table(out, frame)
            continue
        if frame is not None or not block.isValid():
            continue
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockTrailingHorizontalRulerWidth):
            continue  # a rule between questions: the next heading or quote already separates them
        level = fmt.headingLevel()
        if level:
            heading = out.add_heading("", level=min(level, 9))
            _runs(heading, block)
            continue
        if not block.text().strip() and not _is_code(block):
            continue
        lst = block.textList()
        if lst is not None:
            numbered = lst.format().style() in (QTextListFormat.Style.ListDecimal, QTextListFormat.Style.ListLowerAlpha,
                                                QTextListFormat.Style.ListUpperAlpha, QTextListFormat.Style.ListLowerRoman,
                                                QTextListFormat.Style.ListUpperRoman)
            para = out.add_paragraph(style="List Number" if numbered else "List Bullet")
        elif (fmt.property(QTextFormat.Property.BlockQuoteLevel) or 0) > 0:
            para = out.add_paragraph(style="Quote")
        else:
            para = out.add_paragraph()
        code = _is_code(block)
        if code:
            para.paragraph_format.space_after = Pt(0)
        _runs(para, block, code)
    out.save(path)


def write_report(markdown: str, path: str, title: str) -> str:
    """Write `markdown` to `path` in the format its suffix names (.md when it has none that
    is known); returns the format's name. OSError and ExportError say what failed."""
    suffix = Path(path).suffix.lower()
    if suffix == ".htm":
        suffix = ".html"
    if suffix == ".docx":
        write_docx(markdown, path, title)
    elif suffix == ".pdf":
        write_pdf(markdown, path, title)
        if not Path(path).is_file() or not Path(path).stat().st_size:
            raise ExportError(f"{Path(path).name}: the PDF could not be written there")
    elif suffix == ".html":
        Path(path).write_text(to_html(markdown, title), encoding="utf-8")
    else:
        Path(path).write_text(markdown, encoding="utf-8")
        suffix = ".md"
    return FORMATS[suffix]


def with_suffix(path: str, selected_filter: str) -> str:
    """A path from the save dialog with the suffix of the chosen format when it has none."""
    if Path(path).suffix.lower() in (*FORMATS, ".htm", ARCHIVE):
        return path
    found = re.search(r"\*(\.\w+)", selected_filter or "")
    return path + (found.group(1) if found else ".md")
