"""Controls that stay where they are: a widget shown only at times (a download's bar) that
keeps its room while hidden, so the buttons beside it do not jump when it appears. A Cancel
button that moved as the bar appeared was under the pointer one moment and gone the next; so
does a button beside one whose text changes length, unless that one is as wide as its longest text."""

from __future__ import annotations

from typing import Iterable

from PySide6.QtWidgets import QPushButton, QWidget


def keep_place(w: QWidget) -> None:
    """Hide `w`, its room kept in its layout (it stays kept whenever `w` is hidden later)."""
    policy = w.sizePolicy()
    policy.setRetainSizeWhenHidden(True)
    w.setSizePolicy(policy)
    w.hide()


def fit_texts(button: QPushButton, texts: Iterable[str]) -> None:
    """Make `button` as wide as the widest of the texts it will show, so its neighbours do
    not move when its text changes (Download, Resume, Verify files)."""
    shown = button.text()
    widest = 0
    for t in texts:
        button.setText(t)
        widest = max(widest, button.sizeHint().width())
    button.setText(shown)
    button.setMinimumWidth(widest)
