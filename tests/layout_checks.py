"""Geometry a person would see, measured on live widgets: a horizontal scrollbar, text cut
off (a one-line label or button narrower than its text, a wrapped label shorter than its
lines, a combo box or progress bar narrower than its text), a control outside the window or sticking
out sideways from the area that scrolls it,
rows of a layout drawn over each other.
Used by the screenshot tests; each check names the widget so a failure says what to fix."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import (
    QAbstractButton, QAbstractScrollArea, QAbstractSlider, QAbstractSpinBox, QBoxLayout, QComboBox, QLabel, QLineEdit,
    QProgressBar, QStyle, QStyleOptionComboBox, QWidget,
)

CONTROLS = (QAbstractButton, QAbstractSpinBox, QComboBox, QLineEdit, QAbstractSlider)
# Areas whose content may scroll sideways by design: a table of many columns, a code block.
SIDEWAYS_OK = {"codeBlock"}


def _name(c: QWidget) -> str:
    text = c.text() if hasattr(c, "text") and callable(c.text) else ""
    return f"{type(c).__name__}{'#' + c.objectName() if c.objectName() else ''} {str(text)[:30]!r}"


def _shown(c: QWidget, w: QWidget) -> bool:
    return c.isVisibleTo(w) and c.window() is w and c.width() > 0 and c.height() > 0


def horizontal_scrollbars(w: QWidget) -> list[str]:
    """Scroll areas in `w` showing a horizontal scrollbar."""
    out = []
    for a in w.findChildren(QAbstractScrollArea):
        if _shown(a, w) and a.objectName() not in SIDEWAYS_OK and a.horizontalScrollBar().isVisible():
            out.append(f"{_name(a)} scrolls sideways")
    return out


def _combo_room(c: QComboBox) -> int:
    """Pixels a combo box has for its current text (its edit field, less the icon)."""
    if hasattr(c, "text_room"):
        return c.text_room()
    opt = QStyleOptionComboBox()
    c.initStyleOption(opt)
    field = c.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt, QStyle.SubControl.SC_ComboBoxEditField, c)
    return field.width() - (opt.iconSize.width() + 4 if not opt.currentIcon.isNull() else 0)


def clipped_fields(w: QWidget) -> list[str]:
    """Combo boxes and progress bars whose text is wider than the room they draw it in (cut
    off, not shortened); a combo that elides itself must name its whole choice in its tooltip."""
    out = []
    for c in w.findChildren(QWidget):
        if not _shown(c, w):
            continue
        if isinstance(c, QComboBox) and not c.isEditable() and c.currentText():
            need, room = c.fontMetrics().horizontalAdvance(c.currentText()), _combo_room(c)
            if hasattr(c, "is_elided"):
                if c.is_elided() and not c.toolTip().startswith(c.currentText()):
                    out.append(f"{_name(c)}: shortened to {room} px without its whole text in the tooltip")
            elif need > room + 1:
                out.append(f"{_name(c)}: {room} px for {need} px of {c.currentText()!r}")
        elif isinstance(c, QProgressBar) and c.isTextVisible() and c.text():
            room = c.text_room() if hasattr(c, "text_room") else c.width() - 8
            need = c.fontMetrics().horizontalAdvance(c.text())
            if need > room + 1:
                out.append(f"{_name(c)}: {room} px for {need} px of {c.text()!r}")
    return out


def line_edit_fits(e: QLineEdit) -> str | None:
    """A text field narrower than its text (a dialog's field), or None."""
    room = e.width() - 12  # the frame and the text margins
    need = e.fontMetrics().horizontalAdvance(e.text())
    return f"{_name(e)}: {room} px for {need} px of {e.text()!r}" if need > room else None


def clipped_text(w: QWidget) -> list[str]:
    """Buttons and one-line labels narrower than their text; wrapped labels shorter than their lines."""
    out = []
    for c in w.findChildren(QWidget):
        if not _shown(c, w):
            continue
        if isinstance(c, QAbstractButton) or (isinstance(c, QLabel) and not c.wordWrap() and c.text()
                                              and not c.pixmap() and not hasattr(c, "is_elided")):
            if c.width() < c.sizeHint().width() - 1:
                out.append(f"{_name(c)}: {c.width()} px < {c.sizeHint().width()} px of text")
        elif isinstance(c, QLabel) and c.wordWrap() and c.text() and c.hasHeightForWidth():
            need = c.heightForWidth(c.width())
            if c.height() < need - 2:
                out.append(f"{_name(c)}: {c.height()} px tall < {need} px of wrapped lines")
    return out


def _scroller(c: QWidget) -> QWidget | None:
    """The viewport of the nearest scroll area that holds `c`, if any."""
    p = c.parentWidget()
    while p is not None:
        if isinstance(p.parentWidget(), QAbstractScrollArea) and p.parentWidget().viewport() is p:
            return p
        p = p.parentWidget()
    return None


def outside(w: QWidget) -> list[str]:
    """Controls not wholly inside the window, or cut off sideways by the area that scrolls them."""
    out = []
    win = w.rect()
    for c in w.findChildren(QWidget):
        if not (isinstance(c, CONTROLS) and _shown(c, w)):
            continue
        parent = c.parentWidget()
        if parent is not None and (c.x() < -1 or c.geometry().right() > parent.width() + 1):
            out.append(f"{_name(c)} sticks out of its panel ({c.x()}..{c.geometry().right()} in 0..{parent.width()})")
            continue
        g = QRect(c.mapTo(w, QPoint(0, 0)), c.size())
        view = _scroller(c)
        if view is not None:  # scrolled up or down is fine; sideways is not
            v = QRect(view.mapTo(w, QPoint(0, 0)), view.size())
            if g.left() < v.left() - 1 or g.right() > v.right() + 1:
                out.append(f"{_name(c)} is cut off sideways ({g.left()}..{g.right()} in {v.left()}..{v.right()})")
            continue
        if not win.contains(g):
            out.append(f"{_name(c)} is outside the window ({g.x()},{g.y()} {g.width()}x{g.height()})")
    return out


def _item_name(item) -> str:
    if item.widget() is not None:
        return _name(item.widget())
    inner = [item.layout().itemAt(i).widget() for i in range(item.layout().count())] if item.layout() else []
    first = next((c for c in inner if c is not None), None)
    return f"the row of {_name(first)}" if first is not None else type(item).__name__


def overlapping(w: QWidget) -> list[str]:
    """Neighbours in a row or column of a box layout drawn over each other (a layout given
    less room than its rows need, as a page sized below its wrapped rows' heights)."""
    out = []
    for lay in w.findChildren(QBoxLayout):
        host = lay.parentWidget()
        if host is None or not _shown(host, w):
            continue
        items = [lay.itemAt(i) for i in range(lay.count())]
        items = [it for it in items if not it.isEmpty() and it.geometry().isValid()]
        for a, b in zip(items, items[1:]):
            if a.geometry().intersected(b.geometry()).height() > 1 and a.geometry().intersected(b.geometry()).width() > 1:
                out.append(f"{_item_name(a)} and {_item_name(b)} overlap ({a.geometry()} / {b.geometry()})")
    return out


def problems(w: QWidget) -> list[str]:
    return horizontal_scrollbars(w) + clipped_text(w) + clipped_fields(w) + outside(w) + overlapping(w)


def _in_sight(c: QWidget, w: QWidget) -> bool:
    """`c` is shown and wholly inside the part of its scroll area (if any) and window on screen."""
    if not _shown(c, w):
        return False
    g = QRect(c.mapTo(w, QPoint(0, 0)), c.size())
    view = _scroller(c)
    room = QRect(view.mapTo(w, QPoint(0, 0)), view.size()) if view is not None else w.rect()
    return room.contains(g)


def page_problems(w: QWidget, page: str) -> list[str]:
    """`problems` plus what each page must keep in sight at any size: a finished race's verdict
    (without scrolling to it), the models' Fit column (not dropped, not scrolled off), room
    for five rows of bench results (scrolled to, in a short window)."""
    out = problems(w)
    view = w.views[page] if hasattr(w, "views") else None
    if page == "Race" and view is not None and view.result is not None and not _in_sight(view.speedup_label, w):
        out.append("the race's verdict is out of sight")
    if page == "Models" and view is not None:
        table = view.pairs.table
        col = table.model().COLUMNS.index("Fits this machine")
        x = table.columnViewportPosition(col)
        if table.isColumnHidden(col) or x < 0 or x + table.columnWidth(col) > table.viewport().width() + 1:
            out.append("the models' Fit column is out of sight")
    if page == "Bench" and view is not None:
        table = view.table
        rows = table.viewport().height() // table.verticalHeader().defaultSectionSize()
        if rows < 5:
            out.append(f"the bench table has room for {rows} rows of results")
    return out


def settled_problems(qtbot, w: QWidget, check=problems, timeout_ms: int = 3000) -> list[str]:
    """`check(w)` once the layout has settled: polled until it finds nothing or `timeout_ms`
    passes, then what it finds. A resize, an unfolded section or a new value is laid out over
    a few event-loop turns; 50 ms was not enough beside a test run and two busy loops (a
    transient sideways scrollbar at 800 px failed the suite there), and a real problem stays."""
    import time

    end = time.monotonic() + timeout_ms / 1000
    found = check(w)
    while found and time.monotonic() < end:
        qtbot.wait(50)
        found = check(w)
    return found
