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
        self.blockSignals(False)
        self._sync()

    def show_in_use(self, k: int) -> None:
        """With Auto on, move the slider to the k Auto chose (visible, not editable)."""
        if self.auto.isChecked():
            self.slider.blockSignals(True)
            self.slider.setValue(k)
            self.slider.blockSignals(False)
            self.value_label.setText(f"{k}")

    def _sync(self) -> None:
        self.slider.setEnabled(not self.auto.isChecked())
        self.value_label.setText("auto" if self.auto.isChecked() else str(self.slider.value()))

    def _emit(self, *_: object) -> None:
        self._sync()
        self.changed.emit(self.value())
