"""Live charts with pyqtgraph: acceptance per step, tokens/s, accepted-per-step histogram,
and the lookahead in use (so Auto's choices are visible). Redrawn at most ~20 times a
second from numpy arrays, whatever the step rate."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QGridLayout, QWidget

from .. import theme

ROLLING = 16


class StepSeries:
    """Per-step data of one generation (no Qt): what the charts draw and tests check."""

    def __init__(self) -> None:
        self.k: list[int] = []
        self.drafted: list[int] = []
        self.accepted: list[int] = []
        self.emitted: list[int] = []
        self.t: list[float] = []

    def add(self, ev) -> None:
        self.k.append(ev.k)
        self.drafted.append(ev.drafted)
        self.accepted.append(ev.accepted)
        self.emitted.append(ev.emitted)
        self.t.append(ev.t)

    def __len__(self) -> int:
        return len(self.k)

    def acceptance(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(step index, rolling acceptance, cumulative acceptance) over steps that drafted."""
        d = np.asarray(self.drafted, float)
        a = np.asarray(self.accepted, float)
        idx = np.arange(len(d))
        cum = np.divide(np.cumsum(a), np.cumsum(d), out=np.zeros(len(d)), where=np.cumsum(d) > 0)
        kern = np.ones(ROLLING)
        rd = np.convolve(d, kern)[: len(d)]
        ra = np.convolve(a, kern)[: len(a)]
        roll = np.divide(ra, rd, out=np.full(len(d), np.nan), where=rd > 0)
        return idx, roll, cum

    def tokens_per_s(self) -> tuple[np.ndarray, np.ndarray]:
        """(time, tok/s over the last ROLLING steps)."""
        t = np.asarray(self.t, float)
        e = np.cumsum(np.asarray(self.emitted, float))
        if len(t) < 2:
            return t, np.zeros(len(t))
        lag = np.maximum(np.arange(len(t)) - ROLLING, 0)
        dt = t - t[lag]
        de = e - e[lag]
        rate = np.divide(de, dt, out=np.zeros(len(t)), where=dt > 0)
        return t, rate

    def histogram(self, max_k: int = 16) -> np.ndarray:
        """How many steps accepted 0, 1, ... max_k tokens (steps that drafted)."""
        a = [x for x, d in zip(self.accepted, self.drafted) if d > 0]
        return np.bincount(np.asarray(a, int), minlength=max_k + 1)[: max_k + 1] if a else np.zeros(max_k + 1, int)


class LiveCharts(QWidget):
    """Four small plots fed by StepEvents; call `reset()` at each generation."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        pg.setConfigOptions(antialias=True)
        self.series = StepSeries()
        lay = QGridLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.acc_plot = self._plot("Acceptance per step", "step", "rate")
        self.acc_plot.setYRange(0, 1.05)
        self.acc_roll = self.acc_plot.plot(pen=pg.mkPen(theme.CHART_ACCEPTANCE, width=2), name=f"rolling {ROLLING}")
        self.acc_cum = self.acc_plot.plot(pen=pg.mkPen(theme.CHART_CUMULATIVE, width=1, style=pg.QtCore.Qt.PenStyle.DashLine), name="cumulative")
        self.tps_plot = self._plot("Tokens per second", "s", "tok/s")
        self.tps_curve = self.tps_plot.plot(pen=pg.mkPen(theme.CHART_SPEED, width=2))
        self.hist_plot = self._plot("Accepted tokens per step", "accepted", "steps")
        self.hist_bars = pg.BarGraphItem(x=np.arange(17), height=np.zeros(17), width=0.8, brush=theme.CHART_HISTOGRAM)
        self.hist_plot.addItem(self.hist_bars)
        self.k_plot = self._plot("Lookahead in use", "step", "k")
        self.k_plot.setYRange(0, 16.5)
        self.k_curve = self.k_plot.plot(pen=pg.mkPen(theme.CHART_LOOKAHEAD, width=2), stepMode="right")
        self.hist_plot.setYRange(0, 5)
        lay.addWidget(self.acc_plot, 0, 0)
        lay.addWidget(self.tps_plot, 0, 1)
        lay.addWidget(self.hist_plot, 1, 0)
        lay.addWidget(self.k_plot, 1, 1)
        self._dirty = False
        self._timer = QTimer(self)
        self._timer.setInterval(50)
        self._timer.timeout.connect(self._redraw)
        self._timer.start()

    def _plot(self, title: str, x: str, y: str) -> pg.PlotWidget:
        w = pg.PlotWidget()
        w.setTitle(title, size="9pt")
        w.setLabel("bottom", x)
        w.setLabel("left", y)
        w.showGrid(x=True, y=True, alpha=0.2)
        w.setMinimumHeight(120)
        w.setMenuEnabled(False)
        return w

    def set_dark(self, dark: bool) -> None:
        pal = theme.palette(dark)
        bg, fg = pal.chart_bg, pal.chart_fg
        for p in (self.acc_plot, self.tps_plot, self.hist_plot, self.k_plot):
            p.setBackground(bg)
            for ax in ("left", "bottom"):
                p.getAxis(ax).setTextPen(fg)
                p.getAxis(ax).setPen(fg)
            p.setTitle(p.plotItem.titleLabel.text, color=fg, size="9pt")

    def reset(self) -> None:
        self.series = StepSeries()
        self._dirty = True

    def add_steps(self, steps: list) -> None:
        for ev in steps:
            self.series.add(ev)
        self._dirty = True

    def _redraw(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        s = self.series
        if len(s) == 0:
            for c in (self.acc_roll, self.acc_cum, self.tps_curve, self.k_curve):
                c.setData([], [])
            self.hist_bars.setOpts(height=np.zeros(17))
            self.hist_plot.setYRange(0, 5)  # an empty histogram autoscales to a silly (-400, 400)
            return
        idx, roll, cum = s.acceptance()
        ok = ~np.isnan(roll)
        self.acc_roll.setData(idx[ok], roll[ok])
        self.acc_cum.setData(idx, cum)
        t, rate = s.tokens_per_s()
        self.tps_curve.setData(t, rate)
        hist = s.histogram()
        self.hist_bars.setOpts(height=hist)
        self.hist_plot.setYRange(0, max(5, int(hist.max()) + 1))
        ks = np.asarray(s.k, float)
        self.k_curve.setData(np.arange(len(ks)), ks)
