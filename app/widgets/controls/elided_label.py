"""A one-line label that shortens itself with "…" instead of widening the window.

A plain QLabel's minimum width is its whole text, so one long status line (a pair's
title, a hardware summary) can stop a window from getting narrower. This label asks for
a small minimum, draws as much as fits and keeps the full text in its tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """Plain text on one line, elided at the right (or `mode`) when narrower than the text."""

    def __init__(self, text: str = "", parent: QWidget | None = None, *, min_chars: int = 8,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight):
        super().__init__(parent)
        self._mode = mode
        self._min_chars = min_chars
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self.setToolTip(text if text else "")

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        fm = self.fontMetrics()
        m = self.contentsMargins()
        width = min(fm.horizontalAdvance(self.text()), fm.averageCharWidth() * self._min_chars)
        return QSize(width + m.left() + m.right(), super().minimumSizeHint().height())

    def is_elided(self) -> bool:
        """True when the label is too narrow for its whole text (tests, tooltips)."""
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802
        p = QPainter(self)
        r = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), self._mode, r.width())
        p.setPen(self.palette().color(self.foregroundRole()))
        p.drawText(r, int(self.alignment() | Qt.AlignmentFlag.AlignVCenter), shown)
