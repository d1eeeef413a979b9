"""Text that changes while a model computes, drawn without re-laying out the window.

A QLabel's setText asks every layout up to the window for room (QWidget::updateGeometry),
and the window then repaints the panes around it. Done a few times a second while an
answer streams, that relayout and repaint took the GUI thread, and on a machine with as
many compute threads as cores every moment the GUI thread runs is a moment a llama.cpp
thread waits. This label only asks for a new layout when its height really changes (its
wrapped text needs another line); otherwise a new text is one repaint of itself.

A one-line label of known width needs no custom painting: `pin_size` fixes a QLabel's width
and height, and Qt then skips the layout request on setText.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QAction, QGuiApplication, QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

_FLAGS = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap)
SEPARATOR = " · "  # between the pieces of a stats line (engine.measure.report.stats_parts)


def whole_pieces(text: str) -> str:
    """The text with each " · "-separated piece unbreakable: a stats line wraps between
    "95 tokens in 11.19 s" and "3.65 tokens/step", never inside one (it broke as
    "3.65" at a line's end and "tokens/step" on the next). Text without pieces wraps as words."""
    if SEPARATOR not in text:
        return text
    return SEPARATOR.join(piece.replace(" ", "\u00a0") for piece in text.split(SEPARATOR))


class LiveLabel(QWidget):
    """Plain text, wrapped to the width it is given; its width never follows its text.
    Right-click copies it."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self._text = text
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        copy = QAction("Copy", self)
        copy.triggered.connect(lambda: QGuiApplication.clipboard().setText(self._text))
        self.addAction(copy)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        if text == self._text:
            return
        before = self.heightForWidth(self.width())
        self._text = text
        if self.heightForWidth(self.width()) != before:
            self.updateGeometry()  # another line (or one fewer): the layout must know
        self.update()

    def clear(self) -> None:
        self.setText("")

    def hasHeightForWidth(self) -> bool:  # noqa: N802
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        m = self.contentsMargins()
        inner = max(1, width - m.left() - m.right())
        fm = self.fontMetrics()
        h = fm.boundingRect(QRect(0, 0, inner, 1 << 20), _FLAGS, whole_pieces(self._text)).height() if self._text else fm.height()
        return max(fm.height(), h) + m.top() + m.bottom()

    def sizeHint(self) -> QSize:  # noqa: N802
        fm = self.fontMetrics()
        return QSize(fm.averageCharWidth() * 40, self.heightForWidth(max(self.width(), fm.averageCharWidth() * 40)))

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(0, self.fontMetrics().height())

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802
        p = QPainter(self)
        p.setPen(self.palette().color(self.foregroundRole()))
        p.drawText(self.contentsRect(), _FLAGS, whole_pieces(self._text))


def pin_size(label: QLabel, width: int) -> None:
    """Fix a one-line label's width and height: Qt then repaints it on setText without
    asking its layouts for room (a widget whose minimum and maximum sizes are equal)."""
    label.setFixedSize(width, label.sizeHint().height())
