"""The synchronised replay: both recorded runs again at the same time, each token at its
recorded time (times the chosen speed)."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QPushButton

from ...replay import ReplayClock
from ...widgets.panels.race_pane import RacePane
from .layout import SIDES

FRAME_MS = 33  # replay at ~30 fps


class Replay(QObject):
    """RaceView's Replay button, speed box and frame timer, playing into the two panes.

    `recorded` gives the tokens of each side and the finished sides' events (the page's);
    `changed` asks the page to enable its buttons again, `finished` says the replay reached
    its end."""

    changed = Signal()
    finished = Signal()

    def __init__(self, panes: dict[str, RacePane], button: QPushButton, speed: QComboBox, label: QLabel,
                 recorded: Callable[[], tuple[dict[str, list], dict[str, Any]]], parent: QObject) -> None:
        super().__init__(parent)
        self._panes, self._button, self._speed_box, self._label, self._recorded = panes, button, speed, label, recorded
        self._timer = QTimer(self)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._tick)
        self._clock: ReplayClock | None = None
        self.frames = 0
        speed.currentIndexChanged.connect(self._speed_changed)

    @property
    def active(self) -> bool:
        return self._timer.isActive()

    def play(self) -> None:
        """Play both recorded runs at once, each token at its recorded time (× speed)."""
        tokens, _ = self._recorded()
        if not any(tokens.values()):
            return
        self._timer.stop()
        for s in SIDES:
            self._panes[s].clear_text()
            self._panes[s].speed.setText("")
        self._clock = ReplayClock(tokens, speed=self._speed())
        self._clock.start()
        self.frames = 0
        self._timer.start()
        self._button.setText("↻ Restart replay")
        self.changed.emit()
        self._tick()

    def stop(self) -> None:
        if self._timer.isActive():
            self._timer.stop()
            if self._clock is not None:
                for s, rest in self._clock.finish().items():
                    self._panes[s].append(rest)
                    self._show_pane_speed(s)
                    self._panes[s].finish()
            self._label.setText("Replay stopped.")
            self._button.setText("▶ Replay side by side")
            self.changed.emit()

    def _speed(self) -> float:
        return float(self._speed_box.currentData() or 1.0)

    def _speed_changed(self, _i: int) -> None:
        if self._clock is not None:
            self._clock.set_speed(self._speed())  # the virtual clock stays continuous

    def time(self) -> float:
        """Seconds of recorded time the replay has reached."""
        return self._clock.time() if self._clock is not None else 0.0

    def _show_pane_speed(self, side: str) -> None:
        """The pane's header at this point of the replay (its final figure once all is shown)."""
        done = self._recorded()[1].get(side)
        self._panes[side].speed.setText(
            self._clock.speed_text(side, done.stats.decode_tokens_per_s if done is not None else None))

    def _tick(self) -> None:
        clock = self._clock
        if clock is None:
            return
        self.frames += 1
        for s, due in clock.advance().items():
            if due:
                self._panes[s].append(due)
            self._show_pane_speed(s)
        self._label.setText(
            f"Replay {min(clock.time(), clock.end):.2f} s of {clock.end:.2f} s at {self._speed_box.currentText()}")
        if clock.done:
            for pane in self._panes.values():
                pane.finish()
            self._timer.stop()
            self._button.setText("▶ Replay side by side")
            self.finished.emit()
