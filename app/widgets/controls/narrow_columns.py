"""A table that drops its less important columns when narrow, instead of scrolling sideways.

A table of five columns in an 800-px window (or at 1.5x scale) hid its last columns behind a
horizontal scrollbar: on the Models page, the verdict that matters most (does this pair fit
this machine?) was the one scrolled away. Here the columns named droppable are hidden, in
order, while the shown ones do not fit the table's width, and come back when it widens;
what they said must be available elsewhere (the page's details line, a tooltip).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QTableView

SLACK = 12  # px of hysteresis so a table at its limit does not flip a column on and off


class NarrowColumns(QObject):
    """Hide `droppable` columns of `table` (first listed, first hidden) while the shown
    columns need more than its width; `stretch` is the column that takes the rest, which
    needs at least `stretch_min` px."""

    def __init__(self, table: QTableView, droppable: list[int], stretch: int = 0, stretch_min: int = 180):
        super().__init__(table)
        self.table, self.droppable, self.stretch, self.stretch_min = table, droppable, stretch, stretch_min
        table.installEventFilter(self)
        model = table.model()
        for sig in (model.dataChanged, model.modelReset, model.layoutChanged):
            sig.connect(self.apply)

    def _need(self, col: int) -> int:
        if col == self.stretch:
            return self.stretch_min
        header = self.table.horizontalHeader()
        return max(self.table.sizeHintForColumn(col), header.sectionSizeFromContents(col).width())

    def hidden(self) -> list[int]:
        return [c for c in self.droppable if self.table.isColumnHidden(c)]

    def room(self) -> int:
        """The width the columns have. From the table's own size, not its viewport's: the
        table hears of a resize before it resizes its viewport, so a window narrowed with the
        page in view measured the old, wider viewport and kept every column (text cut)."""
        bar = self.table.verticalScrollBar()
        return self.table.maximumViewportSize().width() - (bar.sizeHint().width() if bar.isVisible() else 0)

    def apply(self, *_: object) -> None:
        room = self.room()
        if room <= 0:
            return
        columns = range(self.table.model().columnCount())
        keep = [c for c in columns if c not in self.droppable]
        need = sum(self._need(c) for c in keep)
        shown = set(keep)
        for c in reversed(self.droppable):  # the last listed is the last to go: it comes back first
            extra = self._need(c)
            slack = SLACK if self.table.isColumnHidden(c) else 0
            if need + extra + slack > room:
                break
            need += extra
            shown.add(c)
        for c in self.droppable:
            self.table.setColumnHidden(c, c not in shown)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802
        if obj is self.table and event.type() in (QEvent.Type.Resize, QEvent.Type.Show):
            self.apply()
        return False
