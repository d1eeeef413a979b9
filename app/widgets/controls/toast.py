"""A toast: a short confirmation that floats at the bottom of the window for a moment, where
the eye is after a click (Copy, Export, "Use this setting in Chat"); the status bar keeps
the same line for whoever looks there."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QLabel, QWidget

SHOW_MS = 2500
MARGIN = 40  # px above the window's bottom edge (clear of the status bar)


class Toast(QLabel):
    """One per window, reused: a new toast replaces the one showing."""

    def __init__(self, window: QWidget):
        super().__init__(window)
        self.setObjectName("toast")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setStyleSheet("#toast { background: rgba(40, 40, 40, 225); color: white; border-radius: 8px;"
                           " padding: 8px 16px; }")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        window.installEventFilter(self)
        self.hide()

    def pop(self, text: str, ms: int = SHOW_MS) -> None:
        self.setText(text)
        self._place()
        self.show()
        self.raise_()
        self._timer.start(ms)

    def _place(self) -> None:
        win = self.parentWidget()
        self.setMaximumWidth(max(200, win.width() - 2 * MARGIN))
        self.adjustSize()
        self.move((win.width() - self.width()) // 2, win.height() - self.height() - MARGIN)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False


def toast(widget: QWidget, text: str) -> Toast:
    """Show `text` as a toast in `widget`'s window."""
    win = widget.window()
    t = win.findChild(Toast, "toast", Qt.FindChildOption.FindDirectChildrenOnly)
    if t is None:
        t = Toast(win)
    t.pop(text)
    return t
