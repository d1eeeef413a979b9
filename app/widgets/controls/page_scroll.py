"""The scroll area each page sits in: it fills the window and scrolls only below the page's
minimum size, so a page's minimum never raises the window's (app/widgets/controls/reflow.py makes
pages narrow enough that it scrolls up and down only)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QTimer
from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget


def reveal(widget: QWidget, margin: int = 8) -> None:
    """Scroll the page holding `widget` to it, once the layout under way has settled: a
    result that lands below the fold of a short window (a race's verdict, a bench table)."""

    def scroll() -> None:
        p = widget.parentWidget()
        while p is not None and not isinstance(p, QScrollArea):
            p = p.parentWidget()
        if p is not None:
            p.ensureWidgetVisible(widget, 0, margin)

    QTimer.singleShot(0, widget, scroll)  # dropped if the widget is gone by then


def rows_height(page: QWidget, width: int) -> int:
    """The height below which `page`'s column of rows is drawn one row over the next (0 when
    it has none that wrap). Qt's QVBoxLayout gives a row of wrapped text (height-for-width)
    its height at the width it gets, not its minimum, so a page sized to its minimumSizeHint
    overlapped its rows: in an 800-px window the race's panes lay 22 px over each other."""
    lay = page.layout()
    if not isinstance(lay, QVBoxLayout) or not lay.hasHeightForWidth():
        return 0
    m = lay.contentsMargins()
    inner = width - m.left() - m.right()
    rows = [lay.itemAt(i) for i in range(lay.count()) if not lay.itemAt(i).isEmpty()]
    heights = [r.heightForWidth(inner) if r.hasHeightForWidth() else r.minimumSize().height() for r in rows]
    return sum(heights) + max(lay.spacing(), 0) * max(0, len(rows) - 1) + m.top() + m.bottom()


class PageScroll(QScrollArea):
    """A page that fills the window and scrolls only below its minimum size.

    A page's minimum no longer raises the window's minimum (the window stays ~800 px wide).
    Unlike `setWidgetResizable`, which sizes a page with word-wrapped labels to its
    *preferred* height for the width (so a page that fits scrolls anyway), the page gets
    the viewport's size, or its minimum where the viewport is smaller.
    """

    def __init__(self, page: QWidget):
        super().__init__()
        self.setObjectName(f"{type(page).__name__}Scroll")
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setWidget(page)
        page.installEventFilter(self)

    def _fit(self) -> None:
        page, view = self.widget(), self.viewport().size()
        need = page.minimumSizeHint().expandedTo(page.minimumSize())
        width = max(view.width(), need.width())
        page.resize(width, max(view.height(), need.height(), rows_height(page, width)))

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit()

    def eventFilter(self, obj: Any, event: Any) -> bool:  # noqa: N802
        if obj is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self._fit()  # the page's minimum may have changed (a label's new text)
        return False

