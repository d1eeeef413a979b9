"""One side of a race: a title, a live tok/s figure, a status line and the answer rendered
as Markdown while it streams (as in the chat: markdown_stream.py), tinted by provenance."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QTextBrowser, QVBoxLayout, QWidget

from ..controls.elided_label import ElidedLabel
from ..controls.live_label import pin_size
from ..controls.reflow import Reflow
from ..transcript.markdown_stream import MarkdownStream
from ..transcript.provenance import COLOURS, merge_runs

WIDEST_SPEED = "\u2713 000.00 s \u00b7 0000.0 tok/s"  # the longest speed text (app/replay.py speed_text)
FRAME_MS = 33  # the text is rendered at most ~30 times a second, whatever the token rate


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
        self.text.setObjectName("raceText")
        self.text.document().setDocumentMargin(10)
        self.text.setUndoRedoEnabled(False)
        lay.addLayout(head)
        lay.addWidget(self.subtitle)
        lay.addWidget(self.status)
        lay.addWidget(self.text, 1)
        self._stream = MarkdownStream(self.text.document(), 0, COLOURS)
        self._frame = QTimer(self)
        self._frame.setSingleShot(True)
        self._frame.setInterval(FRAME_MS)
        self._frame.timeout.connect(self.flush)

    def clear(self) -> None:
        self.clear_text()
        self.speed.setText("")
        self.status.setText("")

    def clear_text(self) -> None:
        """An empty answer (a new race, or a replay from the start)."""
        self._frame.stop()
        self.text.clear()
        self._stream = MarkdownStream(self.text.document(), 0, COLOURS)

    def append(self, tokens: list) -> None:
        """Take TokenEvents now; they are shown, rendered, at the next frame."""
        runs = merge_runs([], tokens)
        if runs:
            self._stream.add(runs)
            if not self._frame.isActive():
                self._frame.start()

    def flush(self) -> None:
        """Render what has arrived (the open last block again); follow the end if the view was there."""
        self._frame.stop()
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        if self._stream.render() and at_end:
            bar.setValue(bar.maximum())

    def finish(self) -> None:
        """The answer is complete: show the rest now, rendered as the whole answer is."""
        self._frame.stop()
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        self._stream.finish()
        if at_end:
            bar.setValue(bar.maximum())

    def markdown(self) -> str:
        """Every token's text received so far, as the model wrote it (the source of what is shown)."""
        return self._stream.source

    def plain_text(self) -> str:
        """The rendered text shown now (markup gone)."""
        return self.text.toPlainText()
