"""Layouts that reflow with the window instead of scrolling sideways.

`Reflow` lays a box layout's parts side by side while they fit the width the window gives
them, and stacks them otherwise (the page then grows taller and scrolls up and down, which
people expect, rather than sideways). `SideOverlay` moves a panel between its place in a
layout and a floating sheet over its page, for the drawers a narrow window cannot dock.

Both measure the width a page really has: pages sit in a scroll area that widens them to
their minimum (app/main_window.py's PageScroll), so the width of the page itself says
nothing once it overflows; the viewport's does.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QEvent, QObject, QRect, Qt, QTimer
from PySide6.QtWidgets import QAbstractScrollArea, QBoxLayout, QFrame, QLabel, QLayout, QSplitter, QVBoxLayout, QWidget

SLACK = 8  # px of hysteresis: a layout at its exact limit does not flip back and forth


def overflow(widget: QWidget) -> int:
    """How many px the page holding `widget` is wider than the scroll area showing it (0 when it fits)."""
    w: QWidget | None = widget
    while w is not None:
        parent = w.parentWidget()
        if parent is not None and isinstance(parent.parentWidget(), QAbstractScrollArea) \
                and parent.parentWidget().viewport() is parent:
            return max(0, w.width() - parent.width())
        w = parent
    return 0


def _min_width(item: object) -> int:
    if callable(item) and not isinstance(item, (QWidget, QLayout)):
        return int(item())  # a width the caller measures (a table's columns)
    if isinstance(item, QWidget):
        return item.minimumSizeHint().expandedTo(item.minimumSize()).width() if not item.isHidden() else 0
    if isinstance(item, QLayout):
        return item.minimumSize().width()
    return 0


def side_by_side_width(parts: list, spacing: int, margins: int = 0) -> int:
    """The width `parts` need next to each other."""
    widths = [_min_width(p) for p in parts]
    shown = [w for w in widths if w > 0]
    return sum(shown) + spacing * max(0, len(shown) - 1) + margins


class Reflow(QObject):
    """Side by side while the parts fit the width `host` really has, stacked below that.

    `layout` is a QBoxLayout (its direction flips) or a QSplitter (its orientation flips);
    `parts` are the widgets or layouts it holds (or callables giving a part's width, for a
    part whose minimum is not what it needs). `changed(stacked)` runs after a flip.
    """

    def __init__(self, host: QWidget, layout: QBoxLayout | QSplitter, parts: list,
                 changed: Callable[[bool], None] | None = None):
        super().__init__(host)
        self.host, self.layout, self.parts, self.changed = host, layout, parts, changed
        host.installEventFilter(self)

    @property
    def stacked(self) -> bool:
        if isinstance(self.layout, QSplitter):
            return self.layout.orientation() == Qt.Orientation.Vertical
        return self.layout.direction() in (QBoxLayout.Direction.TopToBottom, QBoxLayout.Direction.BottomToTop)

    def _spacing(self) -> int:
        if isinstance(self.layout, QSplitter):
            return self.layout.handleWidth()
        return max(self.layout.spacing(), 6)

    def needed(self) -> int:
        return side_by_side_width(self.parts, self._spacing())

    def available(self) -> int:
        return self.host.width() - overflow(self.host)

    def apply(self) -> None:
        avail, need = self.available(), self.needed()
        stack = avail < need if not self.stacked else avail < need + SLACK
        if stack == self.stacked:
            return
        if isinstance(self.layout, QSplitter):
            self.layout.setOrientation(Qt.Orientation.Vertical if stack else Qt.Orientation.Horizontal)
        else:
            self.layout.setDirection(QBoxLayout.Direction.TopToBottom if stack else QBoxLayout.Direction.LeftToRight)
        if self.changed is not None:
            self.changed(stack)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802
        if obj is self.host and event.type() in (QEvent.Type.Resize, QEvent.Type.Show, QEvent.Type.LayoutRequest):
            self.apply()
        return False


class SideOverlay(QObject):
    """A panel that sits in `dock` (its place in a layout) or floats over `host` at one side.

    Floating, it covers the page's edge beside `anchor` (the toggle that opens it, which stays
    visible), at most `width` px wide and always inside the page, with its own background.
    """

    def __init__(self, panel: QWidget, dock: QBoxLayout, host: QWidget, anchor: QWidget, *, side: str, width: int):
        super().__init__(host)
        self.panel, self.dock, self.host, self.anchor = panel, dock, host, anchor
        self.side, self.width = side, width
        self.floating = False
        self.sheet = QFrame()  # the floating panel's frame: a background and an edge
        self.sheet.setObjectName("overlaySheet")
        self.sheet.setFrameShape(QFrame.Shape.StyledPanel)
        self.sheet.setAutoFillBackground(True)
        QVBoxLayout(self.sheet).setContentsMargins(4, 4, 4, 4)
        self.sheet.setParent(host)
        self.sheet.hide()
        host.installEventFilter(self)

    def set_floating(self, on: bool) -> None:
        if on == self.floating:
            return
        shown = not self.panel.isHidden()
        self.floating = on
        if on:
            self.dock.removeWidget(self.panel)
            self.sheet.layout().addWidget(self.panel)
        else:
            self.sheet.layout().removeWidget(self.panel)
            self.dock.insertWidget(self.dock.count(), self.panel, 1)
            self.sheet.hide()
        self.set_shown(shown)

    def set_shown(self, on: bool) -> None:
        self.panel.setVisible(on)
        if self.floating:
            self.sheet.setVisible(on)
            if on:
                self.place()
                self.sheet.raise_()

    def place(self) -> None:
        """Beside the anchor, the page's full height, inside the page."""
        if not self.host.isAncestorOf(self.anchor):
            return  # still being built
        host = self.host.rect()
        a = QRect(self.anchor.mapTo(self.host, self.anchor.rect().topLeft()), self.anchor.size())
        if self.side == "right":
            right = a.left() - 2
            width = max(0, min(self.width, right - host.left()))
            self.sheet.setGeometry(right - width, host.top(), width, host.height())
        else:
            left = a.right() + 2 if a.width() else host.left()
            width = max(0, min(self.width, host.right() - left))
            self.sheet.setGeometry(left, host.top(), width, host.height())

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802
        if obj is self.host and event.type() == QEvent.Type.Resize and self.floating and self.sheet.isVisible():
            self.place()
        return False


class WrappingLabel(QLabel):
    """A word-wrapped label that claims the height of its lines at its current width.

    A layout sizes a plain wrapped label from its minimum, which ignores how many lines
    the text takes at the width it got, so a squeezed page cuts the last lines off; this
    one raises its minimum height to its lines and the page grows (and scrolls up and
    down) instead."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(text, parent)
        self.setWordWrap(True)

    def lines_height(self, width: int) -> int:
        """The height of the text's lines at `width`. QLabel.heightForWidth counts the
        label's minimum height, so a height claimed at a narrow width was never given back:
        widened, the race's verdict kept three lines' height for one, gaps between its rows."""
        low = self.minimumHeight()
        if low:
            self.setMinimumHeight(0)
        h = self.heightForWidth(width)
        if low:
            self.setMinimumHeight(low)
        return h

    def _claim(self) -> None:
        h = self.lines_height(self.width()) if self.text() else 0
        if h > 0 and h != self.minimumHeight():
            self.setMinimumHeight(h)
        elif not self.text() and self.minimumHeight():
            self.setMinimumHeight(0)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._claim()

    def setText(self, text: str) -> None:  # noqa: N802
        super().setText(text)
        self._claim()


class HeightClaim(QObject):
    """A box of wrapped text that claims its height at its current width, as WrappingLabel
    does for one label: stacked in a narrow page, the race's result box was given the height
    of its plain minimum, fewer lines than its labels wrap to, and its last rows were drawn
    over (or cut off by) what follows it."""

    def __init__(self, box: QWidget):
        super().__init__(box)
        self.box = box
        box.installEventFilter(self)

    def claim(self) -> None:
        lay = self.box.layout()
        if lay is None or not lay.hasHeightForWidth():
            return
        lay.activate()  # after a row flipped to a stack its cached heights are stale
        h = lay.totalMinimumHeightForWidth(self.box.width())
        if h > 0 and h != self.box.minimumHeight():
            self.box.setMinimumHeight(h)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802
        if obj is self.box and event.type() in (QEvent.Type.Resize, QEvent.Type.LayoutRequest):
            QTimer.singleShot(0, self, self.claim)  # once the layout pass under way is done
        return False
