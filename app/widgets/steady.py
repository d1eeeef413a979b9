"""Controls that stay where they are: a widget shown only at times (a download's bar) that
keeps its room while hidden, so the buttons beside it do not jump when it appears. A Cancel
button that moved as the bar appeared was under the pointer one moment and gone the next."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget


def keep_place(w: QWidget) -> None:
    """Hide `w`, its room kept in its layout (it stays kept whenever `w` is hidden later)."""
    policy = w.sizePolicy()
    policy.setRetainSizeWhenHidden(True)
    w.setSizePolicy(policy)
    w.hide()
