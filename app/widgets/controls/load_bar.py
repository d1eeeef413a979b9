"""The status bar's load progress ("loading target 45%") with its text whole inside the bar.

A QProgressBar of a fixed small width cuts a long label over the bar; this one widens to
its text up to a limit and, past it, shortens the label with "…" (the whole label in the
tooltip), so the percentage always shows.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QProgressBar, QWidget

MAX_WIDTH = 320  # px: the status bar also holds the pair, the speed and the hardware
PADDING = 24  # px around the text (the style's frame and a little air)


class LoadBar(QProgressBar):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hide()

    def show_progress(self, label: str, fraction: float) -> None:
        """Show `label` and the percentage of `fraction` (0..1), the text fitted to the bar."""
        fm = self.fontMetrics()
        widest = f"loading {label} 100%"
        width = min(MAX_WIDTH, fm.horizontalAdvance(widest) + PADDING)
        shown = label
        if fm.horizontalAdvance(widest) + PADDING > width:  # too long even at the widest: shortened in the middle
            room = width - PADDING - fm.horizontalAdvance("loading  100%")
            shown = fm.elidedText(label, Qt.TextElideMode.ElideMiddle, max(room, 0))
        self.setFixedWidth(width)
        self.setFormat(f"loading {shown} %p%")
        self.setToolTip(f"Loading {label}")
        self.setValue(int(fraction * 100))
        self.show()

    def text_room(self) -> int:
        """Pixels the text may take inside the bar."""
        return self.width() - PADDING
