"""The numbered sources under a Library answer: one line each, "[1] briefs/aurora.docx, page 2",
a link the transcript turns into `sourceClicked(message, n)` (the chat opens the file and shows
the passage). What an answer was given is kept with it (its stats' "sources"), so a reopened
chat shows the same list."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument

from ...history import Message, answer_sources, source_place

SCHEME_ACTION = "source"  # msg:source:<message id>:<n>


def insert_sources(cursor: QTextCursor, m: Message, scheme: str, link: QColor, muted: QColor) -> None:
    """The answer's sources as a small list of links at `cursor` (nothing when it has none)."""
    sources = answer_sources(m)
    if not sources:
        return
    small = QFont()
    small.setPointSizeF(max(7.0, small.pointSizeF() * 0.9))
    title = QTextCharFormat()
    title.setFont(small, QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
    title.setFontWeight(QFont.Weight.Bold)
    title.setForeground(muted)
    block = QTextBlockFormat()
    block.setTopMargin(6)
    cursor.insertBlock(block, QTextCharFormat())
    cursor.insertText("Sources", title)
    for i, s in enumerate(sources):
        n = int(s.get("n", i + 1))
        fmt = QTextCharFormat()
        fmt.setFont(small, QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
        fmt.setForeground(link)
        fmt.setAnchor(True)
        fmt.setAnchorHref(f"{scheme}:{SCHEME_ACTION}:{m.id}:{n}")
        fmt.setToolTip("Open the file and show the passage")
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
        cursor.insertText(f"[{n}] {source_place(s)}", fmt)
    cursor.setCharFormat(QTextCharFormat())


def link_citations(doc: QTextDocument, m: Message, scheme: str, link: QColor) -> None:
    """Each "[n]" the answer's rendered text cites a source by becomes a link to that source
    (what its line under the answer does); a number with no source stays text."""
    for i, s in enumerate(answer_sources(m)):
        n = int(s.get("n", i + 1))
        found = doc.find(f"[{n}]")
        while not found.isNull():
            fmt = QTextCharFormat()
            fmt.setAnchor(True)
            fmt.setAnchorHref(f"{scheme}:{SCHEME_ACTION}:{m.id}:{n}")
            fmt.setForeground(link)
            fmt.setToolTip(source_place(s))
            found.mergeCharFormat(fmt)
            found = doc.find(f"[{n}]", found)


def source_of(m: Message | None, n: int) -> dict | None:
    """Source `n` of answer `m`, as stored."""
    if m is None:
        return None
    return next((s for i, s in enumerate(answer_sources(m)) if int(s.get("n", i + 1)) == n), None)
