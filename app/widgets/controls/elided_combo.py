"""A combo box that shortens its shown choice with "…" instead of cutting it off.

QComboBox draws its current text clipped at the arrow ("Draft: qwen2.5-code"), which reads
as a different name. This one draws as much as fits with an ellipsis and, while it is
shortened, puts the whole choice first in its tooltip, so the bar can stay narrow.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox, QStylePainter, QWidget


class ElidedCombo(QComboBox):
    """A QComboBox whose shown text is elided at the right when the box is narrower than it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._explanation = ""
        self.currentTextChanged.connect(lambda _t: self._sync_tooltip())

    def setToolTip(self, text: str) -> None:  # noqa: N802 (Qt's name)
        """The explanation; the whole current choice goes above it while the box shortens it."""
        self._explanation = text
        self._sync_tooltip()

    def text_room(self) -> int:
        """Pixels the current text may take (the edit field less the icon, if any)."""
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        field = self.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt,
                                            QStyle.SubControl.SC_ComboBoxEditField, self)
        icon = opt.iconSize.width() + 4 if not opt.currentIcon.isNull() else 0
        return max(0, field.width() - icon)

    def is_elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.currentText()) > self.text_room()

    def shown_text(self) -> str:
        """The current choice as drawn: whole, or shortened with "…"."""
        return self.fontMetrics().elidedText(self.currentText(), Qt.TextElideMode.ElideRight, self.text_room())

    def _sync_tooltip(self) -> None:
        whole = self.currentText()
        tip = f"{whole}\n\n{self._explanation}" if self.is_elided() and whole else self._explanation
        if tip != super().toolTip():
            super().setToolTip(tip)

    def resizeEvent(self, e: QResizeEvent) -> None:  # noqa: N802
        super().resizeEvent(e)
        self._sync_tooltip()

    def paintEvent(self, _e: QPaintEvent) -> None:  # noqa: N802
        p = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        p.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, opt)
        opt.currentText = self.shown_text()
        p.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, opt)
