"""Live charts with pyqtgraph: acceptance per step, tokens/s, accepted-per-step histogram,
and the lookahead in use (so Auto's choices are visible).

The window must not eat the speed it shows: on a 2-core machine every millisecond the GUI
thread draws is taken from llama.cpp's compute threads. So the data grows incrementally
(each step costs O(1), derived series are computed once per step), the plots are redrawn
at most once a second and only when something changed, and not at all while the
charts are hidden (they catch up when shown again). Lines are one pixel wide and only the
plots of sloped curves (acceptance, tokens/s) are antialiased: a 2-pixel antialiased stroke
cost Qt's raster engine about twice the time per redraw (measured under Xvfb: 75 redraws
of four plots, 0.48 s of GUI-thread CPU before, 0.23 s after).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QGraphicsItem, QGridLayout, QWidget

from ... import theme

ROLLING = 16
REDRAW_MS = 1000  # 1 Hz: live enough for a trend, and each redraw (and its paint) takes CPU from the compute threads
MAX_K = 16


def nice_ceiling(x: float, minimum: float = 1.0) -> float:
    """The smallest of 1, 2, 5, 10, 20, 50, ... (times minimum's decade) that is >= x.

    Axis ranges grow in these steps instead of following every new point: pyqtgraph
    regenerates an axis (ticks, labels) whenever its range changes, which costs far more
    than drawing the curves.
    """
    if not np.isfinite(x) or x <= minimum:
        return minimum
    decade = 10.0 ** np.floor(np.log10(x))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * decade >= x:
            return float(m * decade)
    return float(10.0 * decade)  # pragma: no cover - the loop always returns


class _Column:
    """A growing numpy array (amortised O(1) append, a view of the filled part)."""

    def __init__(self, dtype: type, capacity: int = 256):
        self.a = np.zeros(capacity, dtype)
        self.n = 0

    def append(self, value: float) -> None:
        if self.n == len(self.a):
            self.a = np.concatenate([self.a, np.zeros_like(self.a)])
        self.a[self.n] = value
        self.n += 1

    def view(self) -> np.ndarray:
        return self.a[: self.n]

    def at(self, i: int) -> float:
        """Value at i, or 0 before the start (cumulative sums start from zero)."""
        return float(self.a[i]) if i >= 0 else 0.0


class StepSeries:
    """Per-step data of one generation (no Qt): what the charts draw and tests check.

    Each `add` appends one step and its derived values (rolling and cumulative acceptance,
    tok/s over the last ROLLING steps, histogram counts), so nothing is recomputed from
    the whole history at redraw time.
    """

    def __init__(self) -> None:
        self._k = _Column(np.int32)
        self._drafted = _Column(np.int32)
        self._accepted = _Column(np.int32)
        self._emitted = _Column(np.int32)
        self._t = _Column(np.float64)
        self._cum_d = _Column(np.float64)
        self._cum_a = _Column(np.float64)
        self._cum_e = _Column(np.float64)
        self._roll = _Column(np.float64)  # NaN where the window drafted nothing
        self._cum_acc = _Column(np.float64)
        self._rate = _Column(np.float64)
        self._hist = np.zeros(MAX_K + 1, np.int64)

    def add(self, ev) -> None:
        i = len(self)
        self._k.append(ev.k)
        self._drafted.append(ev.drafted)
        self._accepted.append(ev.accepted)
        self._emitted.append(ev.emitted)
        self._t.append(ev.t)
        cd = self._cum_d.at(i - 1) + ev.drafted
        ca = self._cum_a.at(i - 1) + ev.accepted
        ce = self._cum_e.at(i - 1) + ev.emitted
        self._cum_d.append(cd)
        self._cum_a.append(ca)
        self._cum_e.append(ce)
        self._cum_acc.append(ca / cd if cd > 0 else np.nan)
        rd = cd - self._cum_d.at(i - ROLLING)
        ra = ca - self._cum_a.at(i - ROLLING)
        self._roll.append(ra / rd if rd > 0 else np.nan)
        lag = max(i - ROLLING, 0)
        dt = ev.t - self._t.at(lag)
        de = ce - self._cum_e.at(lag)
        self._rate.append(de / dt if dt > 0 else 0.0)
        if ev.drafted > 0 and 0 <= ev.accepted <= MAX_K:
            self._hist[ev.accepted] += 1

    def __len__(self) -> int:
        return self._k.n

    @property
    def k(self) -> np.ndarray:
        return self._k.view()

    @property
    def drafted(self) -> np.ndarray:
        return self._drafted.view()

    @property
    def accepted(self) -> np.ndarray:
        return self._accepted.view()

    @property
    def emitted(self) -> np.ndarray:
        return self._emitted.view()

    @property
    def t(self) -> np.ndarray:
        return self._t.view()

    def acceptance(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(step index, rolling acceptance over ROLLING steps, cumulative acceptance).

        Acceptance is undefined where nothing was drafted: NaN (not 0) in the rolling value
        where its window drafted nothing, and in the cumulative one before the first draft."""
        return np.arange(len(self)), self._roll.view(), self._cum_acc.view()

    def tokens_per_s(self) -> tuple[np.ndarray, np.ndarray]:
        """(time, tok/s over the last ROLLING steps)."""
        return self.t, self._rate.view()

    def live_rate(self) -> float:
        """tok/s over the last ROLLING steps, at the latest step (0 before two steps)."""
        return float(self._rate.a[len(self) - 1]) if len(self) else 0.0

    @property
    def drafted_total(self) -> int:
        return int(self._cum_d.a[len(self) - 1]) if len(self) else 0

    def histogram(self, max_k: int = MAX_K) -> np.ndarray:
        """How many steps accepted 0, 1, ... max_k tokens (steps that drafted)."""
        return self._hist[: max_k + 1].copy()


class LiveCharts(QWidget):
    """Four small plots fed by StepEvents; call `reset()` at each generation."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        pg.setConfigOptions(antialias=True)
        self.series = StepSeries()
        self.redraws = 0  # how many times the plots were actually redrawn (tests, benchmark)
        lay = QGridLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.acc_plot = self._plot("Acceptance", "step", "rate", "Acceptance per step: rolling over the last steps (solid) and cumulative (dashed)")
        self.acc_roll = self.acc_plot.plot(pen=pg.mkPen(theme.CHART_ACCEPTANCE, width=1), name=f"rolling {ROLLING}")
        self.acc_cum = self.acc_plot.plot(pen=pg.mkPen(theme.CHART_CUMULATIVE, width=1, style=pg.QtCore.Qt.PenStyle.DashLine), name="cumulative")
        self.tps_plot = self._plot("Tokens/s", "s", "tok/s", "Decode speed over the answer, tokens per second")
        self.tps_curve = self.tps_plot.plot(pen=pg.mkPen(theme.CHART_SPEED, width=1))
        self.hist_plot = self._plot("Accepted/step", "accepted", "steps", "How many draft tokens the target accepted per step (histogram)")
        self.hist_bars = pg.BarGraphItem(x=np.arange(MAX_K + 1), height=np.zeros(MAX_K + 1), width=0.8, brush=theme.CHART_HISTOGRAM)
        self.hist_plot.addItem(self.hist_bars)
        self.hist_plot.setAntialiasing(False)  # upright bars: nothing to smooth
        self.k_plot = self._plot("Lookahead", "step", "k", "The lookahead k in use at each step (Auto changes it)")
        self.k_curve = self.k_plot.plot(pen=pg.mkPen(theme.CHART_LOOKAHEAD, width=1), stepMode="right")
        self.k_plot.setAntialiasing(False)  # a staircase of level and upright lines
        self._ranges: dict[tuple[int, str], tuple[float, float]] = {}
        self._set_range(self.hist_plot, "x", -0.6, MAX_K + 0.6)
        self._reset_ranges()
        lay.addWidget(self.acc_plot, 0, 0)
        lay.addWidget(self.tps_plot, 0, 1)
        lay.addWidget(self.hist_plot, 1, 0)
        lay.addWidget(self.k_plot, 1, 1)
        self._dirty = False
        self._drawn_drafted = 0  # drafted tokens the acceptance plot and histogram show
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_MS)
        self._timer.timeout.connect(self._tick)

    def _plot(self, title: str, x: str, y: str, tip: str) -> pg.PlotWidget:
        """A small plot; its title is short so a narrow drawer never clips it, the tooltip says it all."""
        w = pg.PlotWidget()
        w.setTitle(title, size="9pt")
        w.setToolTip(tip)
        w.setLabel("bottom", x)
        w.setLabel("left", y)
        w.getAxis("left").setWidth(42)  # a fixed width: new tick labels never relayout the plot
        w.setMinimumHeight(120)
        w.disableAutoRange()  # ranges grow in nice steps (see nice_ceiling), set by redraw()
        w.setMenuEnabled(False)
        w.setMouseEnabled(x=False, y=False)
        w.hideButtons()
        # Axes and title change rarely (nice ranges): Qt repaints them from a pixmap cache
        # when a curve's update overlaps them, instead of calling pyqtgraph's Python paint().
        cache = QGraphicsItem.CacheMode.DeviceCoordinateCache
        for ax in ("left", "bottom"):
            w.getAxis(ax).setCacheMode(cache)
        w.plotItem.titleLabel.setCacheMode(cache)
        return w

    def _set_range(self, plot: pg.PlotWidget, axis: str, lo: float, hi: float) -> None:
        """Change a plot's x or y range only when it really changes (that regenerates the axis)."""
        key = (id(plot), axis)
        if self._ranges.get(key) == (lo, hi):
            return
        self._ranges[key] = (lo, hi)
        if axis == "x":
            plot.setXRange(lo, hi, padding=0)
        else:
            plot.setYRange(lo, hi, padding=0)

    def _reset_ranges(self) -> None:
        for p in (self.acc_plot, self.k_plot):
            self._set_range(p, "x", 0, 16)
        self._set_range(self.acc_plot, "y", 0, 1.05)
        self._set_range(self.k_plot, "y", 0, MAX_K + 0.5)
        self._set_range(self.tps_plot, "x", 0, 1)
        self._set_range(self.tps_plot, "y", 0, 10)
        self._set_range(self.hist_plot, "y", 0, 5)  # an empty histogram would autoscale to a silly (-400, 400)

    def set_dark(self, dark: bool) -> None:
        bg, fg = ("#1e1f22", "#d0d0d0") if dark else ("#ffffff", "#303030")
        for p in (self.acc_plot, self.tps_plot, self.hist_plot, self.k_plot):
            p.setBackground(bg)
            for ax in ("left", "bottom"):
                p.getAxis(ax).setTextPen(fg)
                p.getAxis(ax).setPen(fg)
            p.setTitle(p.plotItem.titleLabel.text, color=fg, size="9pt")

    def reset(self) -> None:
        self.series = StepSeries()
        self._changed()

    def add_steps(self, steps: list) -> None:
        for ev in steps:
            self.series.add(ev)
        if steps:
            self._changed()

    def _changed(self) -> None:
        """Mark the plots stale; the timer redraws them within REDRAW_MS (never per step)."""
        self._dirty = True
        if not self._timer.isActive():
            self._timer.start()

    def _shown(self) -> bool:
        """On screen: not hidden (Live charts off, another page) nor collapsed to nothing."""
        return self.isVisible() and not self.visibleRegion().isEmpty()

    def _tick(self) -> None:
        if not self._dirty or not self._shown():
            self._timer.stop()  # idle, or hidden: showEvent/resizeEvent resume
            return
        self.redraw()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._dirty:
            self._timer.start()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._dirty:
            self._timer.start()

    def redraw(self) -> None:
        """Push the series into the plots now (the timer calls this at most once a second)."""
        self._dirty = False
        self.redraws += 1
        s = self.series
        if len(s) == 0:
            for c in (self.acc_roll, self.acc_cum, self.tps_curve, self.k_curve):
                c.setData([], [])
            self.hist_bars.setOpts(height=np.zeros(MAX_K + 1))
            self._drawn_drafted = 0
            self._reset_ranges()
            return
        n = len(s)
        idx = np.arange(n)
        steps_hi = nice_ceiling(n, 16)
        drafted = s.drafted_total
        if drafted != self._drawn_drafted:  # acceptance is measured on steps that drafted: only they change it
            self._drawn_drafted = drafted
            _, roll, cum = s.acceptance()
            on = s.drafted > 0
            self.acc_roll.setData(idx[on], roll[on], skipFiniteCheck=True)
            self.acc_cum.setData(idx[on], cum[on], skipFiniteCheck=True)
            self._set_range(self.acc_plot, "x", 0, steps_hi)
            hist = s.histogram()
            self.hist_bars.setOpts(height=hist)
            self._set_range(self.hist_plot, "y", 0, nice_ceiling(float(hist.max()) + 1, 5))
        t, rate = s.tokens_per_s()
        self.tps_curve.setData(t, rate, skipFiniteCheck=True)
        self._set_range(self.tps_plot, "x", 0, nice_ceiling(float(t[-1]), 1))
        self._set_range(self.tps_plot, "y", 0, nice_ceiling(float(rate.max()) * 1.05, 10))
        self.k_curve.setData(idx, np.minimum(s.k, MAX_K).astype(float), skipFiniteCheck=True)  # the slider's scale
        self._set_range(self.k_plot, "x", 0, steps_hi)
