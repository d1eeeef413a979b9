"""Lookahead slider 0–16 with an Auto switch; changes apply to a running generation."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSlider, QWidget

from engine.decoding.drafting.lookahead import MAX_LOOKAHEAD


class LookaheadControl(QWidget):
    """Emits `changed(value)` with an int 0..16 or the string "auto"."""

    changed = Signal(object)

    def __init__(self, parent: QWidget | None = None, value: int | str = "auto"):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("Lookahead"))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, MAX_LOOKAHEAD)
        self.slider.setPageStep(2)
        self.slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.slider.setTickInterval(4)
        self.slider.setToolTip("Tokens the draft proposes per step (0 = target alone). Takes effect at the next step.")
        self.value_label = QLabel()
        self.value_label.setMinimumWidth(28)
        self.auto = QCheckBox("Auto")
        self.auto.setToolTip("Let Tandem pick the lookahead each step from measured costs (including 0 when drafting does not pay)")
        lay.addWidget(self.slider, 1)
        lay.addWidget(self.value_label)
        lay.addWidget(self.auto)
        self._chosen = 0  # the slider's own value, under Auto's readout (show_in_use moves the slider)
        self.slider.valueChanged.connect(self._emit)
        self.auto.toggled.connect(self._emit)
        self.set_value(value)

    def value(self) -> int | str:
        return "auto" if self.auto.isChecked() else int(self.slider.value())

    def set_value(self, value: int | str) -> None:
        self.blockSignals(True)
        if value == "auto":
            self.auto.setChecked(True)
        else:
            self.auto.setChecked(False)
            self.slider.setValue(int(value))
            self._chosen = int(value)
        self.blockSignals(False)
        self._sync()

    def show_in_use(self, k: int) -> None:
        """With Auto on, move the slider to the k Auto chose (visible, not editable). A free
        draft Auto verified past the slider's end reads "16+", never a number off the scale."""
        if self.auto.isChecked():
            shown = max(0, min(int(k), MAX_LOOKAHEAD))
            self.slider.blockSignals(True)
            self.slider.setValue(shown)
            self.slider.blockSignals(False)
            self.value_label.setText(f"{shown}+" if k > MAX_LOOKAHEAD else f"{shown}")

    def clear_in_use(self) -> None:
        """Another chat: the k the last answer used is not this one's; the readout says the setting."""
        self.slider.blockSignals(True)
        self.slider.setValue(self._chosen)
        self.slider.blockSignals(False)
        self._sync()

    def _sync(self) -> None:
        self.slider.setEnabled(not self.auto.isChecked())
        self.value_label.setText("auto" if self.auto.isChecked() else str(self.slider.value()))

    def _emit(self, *_: object) -> None:
        if not self.auto.isChecked():
            self._chosen = int(self.slider.value())
        self._sync()
        self.changed.emit(self.value())
