"""The scroll area each page sits in: it fills the window and scrolls only below the page's
minimum size, so a page's minimum never raises the window's (app/widgets/reflow.py makes
pages narrow enough that it scrolls up and down only)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QScrollArea, QWidget


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
        page.resize(max(view.width(), need.width()), max(view.height(), need.height()))

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit()

    def eventFilter(self, obj: Any, event: Any) -> bool:  # noqa: N802
        if obj is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self._fit()  # the page's minimum may have changed (a label's new text)
        return False

