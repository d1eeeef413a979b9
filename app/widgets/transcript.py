"""The conversation as a document: finished messages as Markdown, the streaming answer as
text coloured by token provenance (toggle: provenance colours on finished answers too)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QTextBrowser, QWidget

from ..history import Message
from .provenance import COLOURS

ROLE_TITLES = {"user": "You", "assistant": "Assistant", "system": "System"}


class Transcript(QTextBrowser):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setOpenExternalLinks(True)
        self.setReadOnly(True)
        self.show_provenance = True
        self._stream_start: int | None = None
        self._stream_spans: list[tuple[int, str]] = []
        self._messages: list[Message] = []
        self.document().setDocumentMargin(12)

    # -- whole conversation --------------------------------------------------------------
    def set_messages(self, messages: list[Message]) -> None:
        self._messages = list(messages)
        self.clear()
        self._stream_start = None
        for m in messages:
            self._append_message(m)
        self._scroll_to_end()

    def set_show_provenance(self, on: bool) -> None:
        self.show_provenance = on
        streaming = self._stream_start is not None
        if not streaming:
            self.set_messages(self._messages)

    def _header(self, cursor: QTextCursor, role: str, status: str = "complete") -> None:
        if not self.document().isEmpty():
            cursor.insertBlock(QTextBlockFormat())
            cursor.insertBlock(QTextBlockFormat())
        fmt = QTextCharFormat()
        fmt.setFontWeight(QFont.Weight.Bold)
        title = ROLE_TITLES.get(role, role)
        if status != "complete":
            title += f"  ({status})"
        cursor.insertText(title, fmt)
        cursor.insertBlock(QTextBlockFormat())

    def _append_message(self, m: Message) -> None:
        cursor = self.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._header(cursor, m.role, m.status)
        if m.role == "assistant" and self.show_provenance and m.spans:
            self._insert_spans(cursor, m.content, m.spans)
        else:
            cursor.insertMarkdown(m.content, QTextDocument.MarkdownFeature.MarkdownDialectGitHub)

    def _insert_spans(self, cursor: QTextCursor, text: str, spans: list[tuple[int, str]]) -> None:
        pos = 0
        for n, prov in spans:
            cursor.insertText(text[pos : pos + n], self._fmt(prov))
            pos += n
        if pos < len(text):
            cursor.insertText(text[pos:], self._fmt("plain"))

    @staticmethod
    def _fmt(prov: str) -> QTextCharFormat:
        f = QTextCharFormat()
        c = COLOURS.get(prov, QColor(0, 0, 0, 0))
        if c.alpha():
            f.setBackground(c)
        return f

    # -- streaming -----------------------------------------------------------------------
    def begin_stream(self) -> None:
        cursor = self.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._header(cursor, "assistant")
        self._stream_start = cursor.position()
        self._stream_spans = []

    def append_tokens(self, tokens: list) -> None:
        """tokens: engine TokenEvents (text, provenance)."""
        if self._stream_start is None:
            return
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        cursor = self.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        for ev in tokens:
            if not ev.text:
                continue
            cursor.insertText(ev.text, self._fmt(ev.provenance if self.show_provenance else "plain"))
        if at_end:
            self._scroll_to_end()

    def end_stream(self, message: Message) -> None:
        """Replace the streamed text by the stored message's rendering."""
        self._stream_start = None
        self._messages.append(message)
        self.set_messages(self._messages)

    def _scroll_to_end(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())


def spans_from_tokens(tokens: list) -> list[tuple[int, str]]:
    """Run-length (characters, provenance) spans from TokenEvents, for storage."""
    spans: list[tuple[int, str]] = []
    for ev in tokens:
        if not ev.text:
            continue
        if spans and spans[-1][1] == ev.provenance:
            spans[-1] = (spans[-1][0] + len(ev.text), ev.provenance)
        else:
            spans.append((len(ev.text), ev.provenance))
    return spans
