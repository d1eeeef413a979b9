"""One side of a race: a title, a live tok/s figure, a status line and the text with
provenance colours."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QTextBrowser, QVBoxLayout, QWidget

from .provenance import COLOURS


class RacePane(QFrame):
    def __init__(self, title: str, subtitle: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 8)
        head = QHBoxLayout()
        self.title = QLabel(f"<b>{title}</b>")
        self.title.setStyleSheet("font-size: 15px;")
        self.subtitle = QLabel(subtitle)
        self.subtitle.setObjectName("paneSubtitle")
        self.speed = QLabel("")
        self.speed.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        f = self.speed.font()
        f.setPointSizeF(f.pointSizeF() * 1.5)
        f.setBold(True)
        self.speed.setFont(f)
        self.speed.setMinimumWidth(150)
        self.status = QLabel("")
        self.status.setObjectName("paneStatus")
        head.addWidget(self.title)
        head.addWidget(self.subtitle)
        head.addStretch(1)
        head.addWidget(self.speed)
        self.text = QTextBrowser()
        self.text.document().setDocumentMargin(10)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(mono)
        lay.addLayout(head)
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
        for ev in tokens:
            if ev.text:
                cursor.insertText(ev.text, self._formats.get(ev.provenance, self._formats["plain"]))
        if at_end:
            bar.setValue(bar.maximum())

    def plain_text(self) -> str:
        return self.text.toPlainText()
