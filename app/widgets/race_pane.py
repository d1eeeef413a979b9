"""One side of a race: a title, a live tok/s figure, a status line and the text with
provenance colours."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QTextBrowser, QVBoxLayout, QWidget

from .elided_label import ElidedLabel
from .live_label import pin_size
from .reflow import Reflow
from .provenance import COLOURS, merge_runs

WIDEST_SPEED = "\u2713 000.00 s \u00b7 0000.0 tok/s"  # the longest speed text (app/replay.py speed_text)


class RacePane(QFrame):
    def __init__(self, title: str, subtitle: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 8)
        head = QHBoxLayout()
        self.title = QLabel(f"<b>{title}</b>")
        self.title.setStyleSheet("font-size: 15px;")
        self.subtitle = ElidedLabel(subtitle)
        self.subtitle.setObjectName("paneSubtitle")
        self.speed = QLabel("")
        self.speed.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        f = self.speed.font()
        f.setPointSizeF(f.pointSizeF() * 1.3)
        f.setBold(True)
        self.speed.setFont(f)
        # As wide as the longest figure it shows, so "✓ 2.93 s · 45.1 tok/s" is never clipped.
        # Pinned to that width: a new figure then repaints the label alone, no relayout.
        pin_size(self.speed, QFontMetrics(f).horizontalAdvance(WIDEST_SPEED) + 4)
        self.status = QLabel("")
        self.status.setObjectName("paneStatus")
        self.status.setWordWrap(True)  # a long summary wraps instead of widening the window
        head.addWidget(self.title)
        head.addStretch(1)
        head.addWidget(self.speed)
        self._reflow = Reflow(self, head, [self.title, self.speed])  # the speed under the title when narrow
        self.text = QTextBrowser()
        self.text.document().setDocumentMargin(10)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(mono)
        lay.addLayout(head)
        lay.addWidget(self.subtitle)
        lay.addWidget(self.status)
        lay.addWidget(self.text, 1)
        self._formats: dict[str, QTextCharFormat] = {}
        for prov, c in COLOURS.items():
            fmt = QTextCharFormat()
            if c.alpha():
                fmt.setBackground(c)
            self._formats[prov] = fmt

    def clear(self) -> None:
        self.text.clear()
        self.speed.setText("")
        self.status.setText("")

    def append(self, tokens: list) -> None:
        """Append TokenEvents in their provenance colours; follow the end if the view was there."""
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        cursor = self.text.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.beginEditBlock()  # one layout pass per batch, not one per token
        for prov, text in merge_runs([], tokens):
            cursor.insertText(text, self._formats.get(prov, self._formats["plain"]))
        cursor.endEditBlock()
        if at_end:
            bar.setValue(bar.maximum())

    def plain_text(self) -> str:
        return self.text.toPlainText()
