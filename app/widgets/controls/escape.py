"""Esc closes what is on top before it does anything else. The chat's Esc stops the answer,
and Qt delivers a window shortcut to a key pressed in a dialog the window owns (a file
viewer, a section picker) when that dialog is not the active window (no window manager,
some X11 set-ups): Esc meant to close the viewer stopped the answer. So the page asks here
first, and only stops when nothing of its own is open."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QDialog, QWidget


def topmost_window(root: QWidget) -> QWidget | None:
    """The open window above `root`'s own that Esc should close: a popup, the window holding
    the focus when that is not `root`'s, else the last shown of `root`'s visible dialogs."""
    main = root.window()
    popup = QApplication.activePopupWidget()
    if popup is not None:
        return popup
    focus = QApplication.focusWidget()
    if focus is not None and focus.window() is not main and focus.window().isVisible():
        return focus.window()
    dialogs = [d for d in main.findChildren(QDialog) if d.isVisible() and d.isWindow()]
    return dialogs[-1] if dialogs else None


def close_topmost(root: QWidget) -> bool:
    """Close the window `topmost_window` finds (a dialog is rejected, as its own Esc does);
    False when there is none."""
    top = topmost_window(root)
    if top is None:
        return False
    if isinstance(top, QDialog):
        top.reject()
    else:
        top.close()
    return True
