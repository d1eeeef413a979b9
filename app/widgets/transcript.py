"""The conversation as a document: finished messages as Markdown, the streaming answer as
text coloured by token provenance (toggle: provenance colours on finished answers too).

Streaming is cheap on purpose: tokens are merged into runs of one provenance and inserted
at most once per frame, at the end of the document through one cursor, in one edit block
(one incremental layout of the last paragraph, never a reflow of the whole conversation).
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QTextBrowser, QWidget

from ..history import Message
from .provenance import COLOURS

ROLE_TITLES = {"user": "You", "assistant": "Assistant", "system": "System"}
FRAME_MS = 16


class Transcript(QTextBrowser):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setOpenExternalLinks(True)
        self.setReadOnly(True)
        self.show_provenance = True
        self._stream_start: int | None = None
        self._stream_spans: list[tuple[int, str]] = []
        self._messages: list[Message] = []
        self._pending: list[list[str]] = []  # [provenance, text] runs waiting for the next frame
        self._stream_cursor: QTextCursor | None = None
        self._formats = {prov: self._fmt(prov) for prov in COLOURS}
        self._frame = QTimer(self)
        self._frame.setSingleShot(True)
        self._frame.setInterval(FRAME_MS)
        self._frame.timeout.connect(self.flush)
        self.edits = 0  # streaming edits of the document, one per frame at most (tests, benchmark)
        self.inserts = 0  # text insertions within them, one per provenance run
        self.setUndoRedoEnabled(False)  # a read-only view: no undo history to grow per token
        self.document().setDocumentMargin(12)

    # -- whole conversation --------------------------------------------------------------
    def set_messages(self, messages: list[Message]) -> None:
        self._messages = list(messages)
        self.clear()
        self._stream_start = None
        self._stream_cursor = None
        self._pending = []
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
        plain = self._formats["plain"]
        for n, prov in spans:
            cursor.insertText(text[pos : pos + n], self._formats.get(prov, plain))
            pos += n
        if pos < len(text):
            cursor.insertText(text[pos:], plain)

    @staticmethod
    def _fmt(prov: str) -> QTextCharFormat:
        f = QTextCharFormat()
        c = COLOURS.get(prov, QColor(0, 0, 0, 0))
        if c.alpha():
            f.setBackground(c)
        return f

    # -- streaming -----------------------------------------------------------------------
    def begin_stream(self) -> None:
        self._pending = []
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._header(cursor, "assistant")
        self._stream_start = cursor.position()
        self._stream_spans = []
        self._stream_cursor = cursor

    def append_tokens(self, tokens: list) -> None:
        """tokens: engine TokenEvents (text, provenance), queued for the next frame.

        A character split across tokens arrives whole with its last token (the earlier
        ones carry ""), so empty pieces are skipped and nothing is ever cut mid-character.
        """
        if self._stream_start is None:
            return
        pending = self._pending
        for ev in tokens:
            if not ev.text:
                continue
            prov = ev.provenance if self.show_provenance else "plain"
            if pending and pending[-1][0] == prov:
                pending[-1][1] += ev.text
            else:
                pending.append([prov, ev.text])
        if pending and not self._frame.isActive():
            self._frame.start()

    def flush(self) -> None:
        """Insert the queued runs now: one edit block, one insertion per provenance run."""
        self._frame.stop()
        runs, self._pending = self._pending, []
        cursor = self._stream_cursor
        if not runs or cursor is None or self._stream_start is None:
            return
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        self.edits += 1
        cursor.beginEditBlock()
        for prov, text in runs:
            cursor.insertText(text, self._formats.get(prov, self._formats["plain"]))
            self.inserts += 1
        cursor.endEditBlock()
        if at_end:
            self._scroll_to_end()

    def stream_text(self) -> str:
        """The streamed answer as shown so far (after `flush`)."""
        if self._stream_start is None:
            return ""
        c = QTextCursor(self.document())
        c.setPosition(self._stream_start)
        c.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        return c.selectedText().replace("\u2029", "\n")

    def end_stream(self, message: Message) -> None:
        """Replace the streamed text by the stored message's rendering."""
        self._frame.stop()
        self._pending = []
        self._stream_start = None
        self._stream_cursor = None
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
