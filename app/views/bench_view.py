"""Bench: pick suites (built-in or your own file), modes, a lookahead sweep and repetitions;
run with progress; read the results table and charts; export the full report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView, QCheckBox, QFileDialog, QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
    QListWidget, QListWidgetItem, QProgressBar, QPushButton, QSpinBox, QSplitter, QTableView, QVBoxLayout, QWidget,
)

from engine.measure import bench, bench_report
from engine.measure import suites as bench_suites

from .. import theme, workers
from ..session import Session
from ..widgets.controls.page_scroll import reveal
from ..widgets.controls.reflow import Reflow
from ..widgets.controls.toast import toast
from .bench_results import COLUMN_TIPS, COLUMNS, ResultsModel, chat_setting  # noqa: F401  (the page's table)


SUITE_WIDTH = 160  # px of a suite's name before it is elided (a side-by-side layout's share)
TABLE_ROWS = 6  # rows of results the table keeps in sight; stacked, the page scrolls to them


class BenchView(QWidget):
    message = Signal(str)
    error = Signal(str)
    useSetting = Signal(dict)  # {"drafter": "model" | "lookup" | "none", "lookahead": int | "auto"} for Chat

    def __init__(self, session: Session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.worker: workers.BenchWorker | None = None
        self.result: bench.BenchResult | None = None
        self._token_s: tuple[float, str] | None = None  # seconds per target token, and its basis
        self._run_sizes: dict[str, list[int]] = {}  # requests per run (1 for a lone prompt), per suite
        self._build()
        session.busyChanged.connect(self._sync)
        session.pairChanged.connect(self._pair_changed)
        self._pair_changed()

    def _build(self) -> None:
        """The settings column (suites, run options, buttons, progress) | results and charts."""
        root = QHBoxLayout(self)
        split = QSplitter(Qt.Orientation.Horizontal)
        root.addWidget(split)
        settings = self._build_settings()
        split.addWidget(settings)
        split.addWidget(self._build_results())
        split.setSizes([300, 900])
        split.setStretchFactor(0, 0)  # a narrower window takes room from the settings, not the results
        split.setStretchFactor(1, 1)
        # A narrow window stacks the settings above the results: the table keeps its columns.
        self._reflow = Reflow(self, split, [settings, self._table_width])

    def _table_width(self) -> int:
        """The width the results table needs to show every column: the figures' own widths
        and the suite's name at up to SUITE_WIDTH. Not the header's length, which counts the
        name column stretched over a stacked page's whole width: stacked once, never again
        side by side, even at 1360 px, with the table squeezed to one row under the settings."""
        header = self.table.horizontalHeader()
        shown = [c for c in range(self.model.columnCount()) if not header.isSectionHidden(c)]
        name = max(header.sectionSizeHint(0), min(self.table.sizeHintForColumn(0), SUITE_WIDTH))
        figures = sum(max(header.sectionSizeHint(c), self.table.sizeHintForColumn(c)) for c in shown if c != 0)
        return name + figures + 2 * self.table.frameWidth() + 4

    def _build_suites(self) -> QGroupBox:
        box = QGroupBox("Suites")
        bl = QVBoxLayout(box)
        self.suites = QListWidget()
        for name in bench_suites.builtin_suites():
            n = len(bench_suites.load_suite(name).prompts)
            it = QListWidgetItem(f"{name} ({n})")
            it.setData(Qt.ItemDataRole.UserRole, name)
            it.setFlags(it.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            it.setCheckState(Qt.CheckState.Checked if name in ("code_generation", "code_editing") else Qt.CheckState.Unchecked)
            self.suites.addItem(it)
        add = QPushButton("Add suite file…")
        add.setToolTip("One prompt per line (.txt), or JSON lines with \"prompt\" or \"messages\"")
        add.clicked.connect(lambda: self.add_suite_file())
        bl.addWidget(self.suites)
        bl.addWidget(add)
        return box

    def _build_options(self) -> QGroupBox:
        """Modes, the lookahead sweep, repetitions, prompts per suite, max tokens."""
        opts = QGroupBox("Run")
        form = QFormLayout(opts)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # labels above their fields when narrow
        self.mode_boxes: dict[str, QCheckBox] = {}
        modes_row = QGridLayout()  # two by two: one row of four made the settings 480 px wide
        for i, (m, label) in enumerate((("target", "target alone"), ("fixed", "fixed k"), ("auto", "auto"),
                                        ("lookup", "prompt lookup"))):
            cb = QCheckBox(label)
            cb.setChecked(True)
            if m == "target":
                cb.setEnabled(False)  # the reference every speedup is measured against
            self.mode_boxes[m] = cb
            modes_row.addWidget(cb, i // 2, i % 2)
        form.addRow("Modes", modes_row)
        self.sweep = QLineEdit("1,2,4,8")
        self.sweep.setToolTip("Lookahead values for the fixed-k sweep")
        form.addRow("Lookahead sweep", self.sweep)
        self.repeat = QSpinBox()
        self.repeat.setRange(1, 20)
        self.repeat.setValue(3)
        form.addRow("Repetitions", self.repeat)
        self.limit = QSpinBox()
        self.limit.setRange(0, 100)
        self.limit.setValue(3)
        self.limit.setSpecialValueText("all")
        self.limit.setToolTip("How many prompts of each suite to run; in a suite of runs of several requests, how many runs (each sent whole)")
        form.addRow("Prompts per suite", self.limit)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(8, 4096)
        self.max_tokens.setValue(128)
        form.addRow("Max tokens", self.max_tokens)
        return opts

    def _build_settings(self) -> QWidget:
        """Suites and options, the time estimate, Run / Cancel / Export, and the progress."""
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.addWidget(self._build_suites())
        ll.addWidget(self._build_options())
        self.estimate_label = QLabel("")
        self.estimate_label.setObjectName("benchEstimate")
        self.estimate_label.setWordWrap(True)
        ll.addWidget(self.estimate_label)
        self.suites.itemChanged.connect(lambda _it: self.update_estimate())
        for cb in self.mode_boxes.values():
            cb.toggled.connect(lambda _on: self.update_estimate())
        self.sweep.textChanged.connect(lambda _t: self.update_estimate())
        for spin in (self.repeat, self.limit, self.max_tokens):
            spin.valueChanged.connect(lambda _v: self.update_estimate())
        row = QHBoxLayout()
        self.start_btn = QPushButton("Run benchmark")
        self.start_btn.clicked.connect(self.start)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel)
        self.export_btn = QPushButton("Export…")
        self.export_btn.clicked.connect(lambda: self.export())
        row.addWidget(self.start_btn)
        row.addWidget(self.cancel_btn)
        row.addWidget(self.export_btn)
        ll.addLayout(row)
        self.why_label = QLabel("")
        self.why_label.setObjectName("hint")
        self.why_label.setWordWrap(True)
        ll.addWidget(self.why_label)
        self.progress = QProgressBar()
        self.progress_label = QLabel("")
        self.progress_label.setWordWrap(True)
        ll.addWidget(self.progress)
        ll.addWidget(self.progress_label)
        ll.addStretch(1)
        return left

    def _build_table(self) -> QTableView:
        self.model = ResultsModel()
        self.table = QTableView()
        self.table.setModel(self.model)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # the suite name gives way, elided in the middle
        header.setMinimumSectionSize(40)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.setWordWrap(False)  # "heldo…editing", not one elided line per path part
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._sync())
        # a table of TABLE_ROWS rows at least: squeezed under the settings it showed one and a half
        rows = self.table.verticalHeader().defaultSectionSize() * TABLE_ROWS
        self.table.setMinimumHeight(rows + header.sizeHint().height() + 2 * self.table.frameWidth())
        return self.table

    def _build_charts(self) -> QWidget:
        """tok/s and acceptance against the lookahead, side by side."""
        self.charts = QWidget()
        charts = QHBoxLayout(self.charts)
        charts.setContentsMargins(0, 0, 0, 0)
        self.tps_plot = pg.PlotWidget(title="tok/s vs lookahead")
        self.acc_plot = pg.PlotWidget(title="acceptance vs lookahead")
        for p, y in ((self.tps_plot, "tok/s"), (self.acc_plot, "acceptance")):
            p.setLabel("bottom", "lookahead k")
            p.setLabel("left", y)
            p.showGrid(x=True, y=True, alpha=0.2)
            p.addLegend(offset=(-5, 5))
            p.setMinimumHeight(220)
            charts.addWidget(p)
        self.acc_plot.setYRange(0, 1.05)
        return self.charts

    def _build_results(self) -> QWidget:
        """The results table, "Use this setting in Chat", and the charts."""
        right = QWidget()
        rl = QVBoxLayout(right)
        self._build_table()
        self.use_btn = QPushButton("Use this setting in Chat")
        self.use_btn.setToolTip("Set Chat's drafter and lookahead to the selected row's")
        self.use_btn.clicked.connect(lambda: self.use_selected())
        self.note = QLabel("Wall × = target alone's time ÷ this time, prompt in to last token out; Decode × = tok/s "
                           "÷ target alone's, same prompt and repetition (medians; ranges on hover).")
        self.note.setWordWrap(True)
        self._build_charts()
        self.plot_note = QLabel("")
        self.plot_note.setWordWrap(True)
        self.plot_note.hide()
        use_row = QHBoxLayout()
        use_row.addWidget(self.note, 1)
        use_row.addWidget(self.use_btn)
        rl.addWidget(self.table, 3)
        rl.addLayout(use_row)
        rl.addWidget(self.plot_note)
        rl.addWidget(self.charts, 2)
        return right

    def set_dark(self, dark: bool) -> None:
        bg = theme.palette(dark).chart_bg
        for p in (self.tps_plot, self.acc_plot):
            p.setBackground(bg)

    # -- actions -------------------------------------------------------------------------
    def add_suite_file(self, path: str | None = None) -> None:
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Add a prompt suite", "", "Suites (*.txt *.jsonl *.json);;All files (*)")
            if not path:
                return
        try:
            suite = bench_suites.load_suite(path)
        except bench.BenchError as e:
            self.error.emit(str(e))
            return
        it = QListWidgetItem(f"{suite.name} ({len(suite.prompts)}) — {Path(path).name}")
        it.setData(Qt.ItemDataRole.UserRole, str(path))
        it.setFlags(it.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        it.setCheckState(Qt.CheckState.Checked)
        self.suites.addItem(it)

    def selected_suites(self) -> list[str]:
        out = []
        for i in range(self.suites.count()):
            it = self.suites.item(i)
            if it.checkState() == Qt.CheckState.Checked:
                out.append(str(it.data(Qt.ItemDataRole.UserRole)))
        return out

    def start(self) -> None:
        if self.session.engine is None:
            self.error.emit("Load a pair first (Models)")
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        names = self.selected_suites()
        if not names:
            self.error.emit("Pick at least one suite")
            return
        try:
            sweep = [int(x) for x in self.sweep.text().replace(" ", "").split(",") if x]
            if any(not 1 <= k <= 16 for k in sweep):
                raise ValueError
        except ValueError:
            self.error.emit("The lookahead sweep is a comma list of integers 1..16, like 1,2,4,8")
            return
        try:
            suites = [bench_suites.load_suite(n) for n in names]
            pair = self.session.pair
            draft = pair.draft if pair is not None else None
            modes = [m for m, cb in self.mode_boxes.items() if cb.isChecked()]
            configs = bench.plan_configs(draft, modes, sweep)
        except bench.BenchError as e:
            self.error.emit(str(e))
            return
        w = workers.BenchWorker(self.session.engine, suites, configs, repeat=self.repeat.value(),
                                max_tokens=self.max_tokens.value(), limit=self.limit.value() or None)
        w.progress.connect(self._on_progress)
        w.result.connect(self.show_result)
        w.failed.connect(self.error)
        w.finished.connect(self._finished)
        self.worker = w
        self.progress.setValue(0)
        self.session.run(w, "benchmark")
        self._sync()

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.progress_label.setText("Cancelling after the current run…")

    def shutdown(self) -> None:
        self.cancel()

    def _on_progress(self, done: int, total: int, label: str) -> None:
        self.progress.setMaximum(total)
        self.progress.setValue(done)
        self.progress_label.setText(label)

    def _finished(self) -> None:
        self.worker = None
        self._refresh_speed()  # the run refreshed Auto's calibration
        self._sync()

    def show_result(self, res: bench.BenchResult) -> None:
        self.result = res
        self.model.set_rows(res.rows)
        self.progress_label.setText(f"Done in {res.meta.get('seconds')} s")
        bugs = sum(r.bugs for r in res.rows)
        if bugs:
            self.error.emit(f"{bugs} speculative output(s) parted from target alone at more than numeric noise")
        self._plot(res)
        if self._reflow.stacked:  # the table under the settings, below the fold of a short window
            reveal(self.table)

    def _plot(self, res: bench.BenchResult) -> None:
        """Curves of tok/s and acceptance over the fixed-k sweep; a note instead of a plot
        when the sweep has fewer than two points (one point is not a curve)."""
        self.tps_plot.clear()
        self.acc_plot.clear()
        ks = {r.lookahead for r in res.rows if r.mode == "fixed" and isinstance(r.lookahead, int)}
        if len(ks) < 2:
            why = "no fixed-k runs" if not ks else f"only k={next(iter(ks))} was run"
            self.plot_note.setText(f"No lookahead charts: {why}. A curve needs two or more lookahead values "
                                   "in the sweep (for example 1,2,4,8) with \u201cfixed k\u201d ticked.")
            self.plot_note.show()
            self.charts.hide()
            return
        self.plot_note.hide()
        self.charts.show()
        for p in (self.tps_plot, self.acc_plot):  # the lookaheads run, not 1.5 and 2.5
            p.getAxis("bottom").setTicks([[(float(k), str(k)) for k in sorted(ks)]])
        for i, suite in enumerate(dict.fromkeys(r.suite for r in res.rows)):
            colour = theme.SERIES[i % len(theme.SERIES)]
            rows = [r for r in res.rows if r.suite == suite]
            fixed = sorted((r for r in rows if isinstance(r.lookahead, int) and r.mode == "fixed"), key=lambda r: r.lookahead)
            ks = np.array([r.lookahead for r in fixed], float)
            pen = pg.mkPen(colour, width=2)
            self.tps_plot.plot(ks, [r.tok_s_median for r in fixed], pen=pen, symbol="o", symbolBrush=colour, name=suite)
            self.acc_plot.plot(ks, [r.acceptance_median for r in fixed], pen=pen, symbol="o", symbolBrush=colour, name=suite)
            base = next((r for r in rows if r.mode == "target"), None)
            if base is not None:
                line = pg.InfiniteLine(pos=base.tok_s_median, angle=0, pen=pg.mkPen(colour, style=Qt.PenStyle.DotLine))
                self.tps_plot.addItem(line)

    def export(self, folder: str | None = None) -> None:
        if self.result is None:
            self.message.emit("Run a benchmark first")
            return
        if folder is None:
            folder = QFileDialog.getExistingDirectory(self, "Export the benchmark report to…")
            if not folder:
                return
        try:
            files = bench_report.write_reports(self.result, folder)
        except OSError as e:
            self.error.emit(f"{folder}: cannot write ({e.strerror})")
            return
        self.message.emit(f"Wrote {len(files)} files to {folder}")

    def use_selected(self) -> None:
        """Send the selected row's drafter and lookahead to Chat."""
        row = self.selected_row()
        if row is None:
            self.message.emit("Select a row of the results first")
            return
        setting = chat_setting(row)
        self.useSetting.emit(setting)
        self.message.emit(f"Chat now uses {row.config} ({setting['drafter']}, lookahead {setting['lookahead']})")
        toast(self, f"Chat now uses {row.config}")

    def selected_row(self) -> bench.Row | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.rows[rows[0].row()] if rows else None

    # -- the estimate and the Run button's state ----------------------------------------
    def _pair_changed(self, *_: object) -> None:
        self._refresh_speed()
        self._sync()

    def _refresh_speed(self) -> None:
        """Seconds per target token for the loaded pair (read once per pair and after runs)."""
        engine = self.session.engine
        self._token_s = None
        if engine is not None:
            try:
                self._token_s = bench.target_token_seconds(engine)
            except Exception:  # an estimate must never break the view
                self._token_s = None
        self.update_estimate()

    def _count_prompts(self, name: str, limit: int | None) -> int:
        """Requests the bench will send for a suite: the limit counts runs (a lone prompt is one)."""
        if name not in self._run_sizes:
            self._run_sizes[name] = [len(g) for g in bench_suites.load_suite(name).runs()]
        return sum(self._run_sizes[name][:limit] if limit else self._run_sizes[name])

    def update_estimate(self) -> None:
        """"about 126 generations (+7 warm-up), ~15 min on this machine" for the current choices."""
        try:
            limit = self.limit.value() or None
            n = sum(self._count_prompts(s, limit) for s in self.selected_suites())
            sweep = [int(x) for x in self.sweep.text().replace(" ", "").split(",") if x]
            pair = self.session.pair
            draft = pair.draft if pair is not None else "draft.gguf"  # no pair yet: assume a draft model
            modes = [m for m, cb in self.mode_boxes.items() if cb.isChecked()]
            configs = bench.plan_configs(draft, modes, sweep)
        except (ValueError, bench.BenchError):
            self.estimate_label.setText("Estimate: fix the settings above first.")
            return
        token_s, basis = self._token_s if self._token_s is not None else (None, "")
        est = bench.estimate(n, configs, repeat=self.repeat.value(), max_tokens=self.max_tokens.value(),
                             token_s=token_s, basis=basis)
        text = est.text().capitalize()
        if est.seconds is None:
            text += "; load a pair for a time estimate"
            tip = "The time needs the loaded target's speed."
        else:
            tip = (f"{est.generations + est.warmup} generations × {self.max_tokens.value()} tokens × "
                   f"{1000 * token_s:.0f} ms per token, from {basis}. Runs that stop early take less.")
        self.estimate_label.setText(text + ".")
        self.estimate_label.setToolTip(tip)

    def run_blocker(self) -> str:
        """Why Run benchmark cannot start now, in words; "" when it can."""
        if self.worker is not None:
            return "A benchmark is running."
        if self.session.engine is None:
            return "Load a pair first (Models)."
        busy = self.session.busy
        if busy:
            return f"A {busy} is running; it must finish first." if busy != "loading" else "A pair is loading."
        return ""

    def _sync(self, *_: object) -> None:
        running = self.worker is not None
        why = self.run_blocker()
        self.start_btn.setEnabled(not why)
        self.start_btn.setToolTip(why or "Run every checked suite in every checked mode")
        self.why_label.setText(why)
        self.why_label.setVisible(bool(why) and not running)
        self.cancel_btn.setEnabled(running)
        self.export_btn.setEnabled(self.result is not None)
        self.use_btn.setEnabled(self.selected_row() is not None)
