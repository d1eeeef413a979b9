"""Where a window opens the first time (no saved geometry): a size that fits the screen it
opens on, centred there. A fixed 1360x860 was larger than a 1600x1000 screen at 1.5x scale
(2040x1290 device pixels), so the window manager shrank it to its minimum in a corner."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize

PREFERRED = QSize(1360, 860)
SCREEN_SHARE = 0.85  # of the free screen, leaving the desktop visible around the window


def first_geometry(available: QRect, minimum: QSize, preferred: QSize = PREFERRED) -> QRect:
    """The preferred size, or SCREEN_SHARE of `available` (the screen less its panels) where
    that is smaller, never below `minimum` (nor above the screen); centred on `available`."""
    w = min(preferred.width(), int(available.width() * SCREEN_SHARE))
    h = min(preferred.height(), int(available.height() * SCREEN_SHARE))
    w = min(max(w, minimum.width()), available.width())
    h = min(max(h, minimum.height()), available.height())
    rect = QRect(0, 0, w, h)
    rect.moveCenter(available.center())
    return rect
