"""Horizontal bars of tok/s on one scale, one per run: a speedup seen at a glance."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

from ... import theme


class SpeedBars(QWidget):
    """`titles`: run key -> label, top to bottom; colours from theme.RACE_SIDES."""

    def __init__(self, titles: dict[str, str], parent: QWidget | None = None):
        super().__init__(parent)
        self.titles = dict(titles)
        self.values: dict[str, float] = {}
        self.neutral = False  # no winner's colour: the headline is no measured speedup (nothing drafted, noise, busy, a replay)
        self.setMinimumHeight(64)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(320, 64)

    def set_values(self, *, neutral: bool = False, **values: float) -> None:
        self.values = dict(values)
        self.neutral = neutral
        self.update()

    def clear(self) -> None:
        self.values = {}
        self.neutral = False
        self.update()

    def bar_colour(self, key: str) -> QColor:
        """A side's colour, or grey for both when the race showed no real difference."""
        return QColor(*(theme.GREY if self.neutral else theme.RACE_SIDES.get(key, theme.GREY)))

    def paintEvent(self, _ev: Any) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fg = self.palette().color(QPalette.ColorRole.WindowText)  # readable on light and dark palettes
        label_w, value_w = 110, 90
        w = max(10, self.width() - label_w - value_w - 8)
        row_h = (self.height() - 6) / max(1, len(self.titles))
        top = max(self.values.values(), default=0.0) or 1.0
        for i, (key, title) in enumerate(self.titles.items()):
            y = 3 + i * row_h
            p.setPen(fg)
            p.drawText(QRectF(0, y, label_w, row_h), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, title)
            v = self.values.get(key, 0.0)
            track = QRectF(label_w, y + row_h * 0.2, w, row_h * 0.6)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(*theme.TRACK))
            p.drawRoundedRect(track, 3, 3)
            if v > 0:
                p.setBrush(self.bar_colour(key))
                p.drawRoundedRect(QRectF(track.x(), track.y(), w * v / top, track.height()), 3, 3)
            p.setPen(fg)
            p.drawText(QRectF(label_w + w + 8, y, value_w, row_h), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       f"{v:.1f} tok/s" if v > 0 else "–")
        p.end()
