"""The draft optimiser as a dialog: progress while it requantises (or fetches) and measures,
then the before/after table, the break-even figures and whether the variant was kept.

Standalone so the Models view can mount it on a button: `OptimizeDraftDialog.for_pair(pair,
catalog, parent).show()`. The work runs on a worker thread (`engine.measure.optimize` does the
measuring); the window stays responsive, Cancel stops between measurement steps (a running
requantisation, some seconds, finishes first), and errors are shown as one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog, QHBoxLayout, QHeaderView, QLabel, QProgressBar, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout,
    QWidget,
)

from engine.errors import TandemError

from .. import workers


class OptimizeDraftWorker(workers.Worker):
    """`engine.measure.optimize.optimize_draft` off the GUI thread."""

    progress = Signal(str, float)
    result = Signal(object)  # engine.measure.optimize.OptimizeResult

    def __init__(self, target: Path, draft: Path, pair: Any = None, **options: Any):
        super().__init__()
        self.target, self.draft, self.pair, self.options = target, draft, pair, options

    def work(self) -> None:
        from engine.measure import optimize

        res = optimize.optimize_draft(self.target, self.draft, pair=self.pair, progress=self.progress.emit,
                                      cancel=self._cancel, **self.options)
        self.result.emit(res)


class OptimizeDraftDialog(QDialog):
    """Run the optimiser for one target/draft and show what it measured and decided."""

    optimized = Signal(object)  # OptimizeResult, once finished (kept or not)

    def __init__(self, target: Path, draft: Path, pair: Any = None, parent: QWidget | None = None, **options: Any):
        super().__init__(parent)
        self.target, self.draft, self.pair, self.options = Path(target), Path(draft), pair, options
        self.setWindowTitle("Optimise the draft")
        self._worker: OptimizeDraftWorker | None = None
        self._close_when_done = False
        self.result: Any = None

        intro = QLabel(
            f"Draft <b>{self.draft.name}</b> for target <b>{self.target.name}</b>.<br>"
            "Tandem obtains the draft in the type this machine runs fastest (CPU: Q4_0), measures both drafts "
            "against the target on a few code prompts, and keeps the faster one only if it predicts a better "
            "speedup. Output never changes: the target decides every token."
        )
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        self.status = QLabel("Ready.")
        self.status.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["", "Original", "Variant"])
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict = QLabel("")
        self.verdict.setWordWrap(True)
        f = self.verdict.font()
        f.setBold(True)
        self.verdict.setFont(f)

        self.start_btn = QPushButton("Start")
        self.cancel_btn = QPushButton("Cancel")
        self.close_btn = QPushButton("Close")
        self.cancel_btn.setEnabled(False)
        self.start_btn.clicked.connect(self.start)
        self.cancel_btn.clicked.connect(self.cancel)
        self.close_btn.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.start_btn, self.cancel_btn, self.close_btn):
            buttons.addWidget(b)

        lay = QVBoxLayout(self)
        for w in (intro, self.bar, self.status, self.table, self.details, self.verdict):
            lay.addWidget(w)
        lay.addLayout(buttons)
        self.resize(640, 560)

    @classmethod
    def for_pair(cls, pair: Any, catalog: Any = None, parent: QWidget | None = None, **options: Any) -> "OptimizeDraftDialog":
        """A dialog for a catalog pair whose files are on disk (TandemError otherwise)."""
        from engine.models import store

        t, d = store.find_model(pair.target.id, catalog), store.find_model(pair.draft.id, catalog)
        if t is None or d is None:
            raise TandemError(f"pair {pair.id!r} is not downloaded yet")
        return cls(t, d, pair, parent, **options)

    @property
    def running(self) -> bool:
        return self._worker is not None

    # -- actions ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.running:
            return
        self.result = None
        self.table.setRowCount(0)
        self.details.setText("")
        self.verdict.setText("")
        self.bar.setValue(0)
        self.status.setText("Starting…")
        w = OptimizeDraftWorker(self.target, self.draft, self.pair, **self.options)
        w.progress.connect(self._on_progress)
        w.result.connect(self._on_result)
        w.failed.connect(self._on_failed)
        w.finished.connect(self._on_finished)
        self._worker = w
        self.start_btn.setEnabled(False)
        self.cancel_btn.setEnabled(True)
        workers.start(w)

    def cancel(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            self.cancel_btn.setEnabled(False)
            self.status.setText("Cancelling after the current step…")

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt naming
        if self.running:  # never block the GUI waiting: close once the worker has stopped
            self._close_when_done = True
            self.cancel()
            event.ignore()
            return
        super().closeEvent(event)

    # -- worker signals -------------------------------------------------------------------
    def _on_progress(self, message: str, fraction: float) -> None:
        self.bar.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.status.setText(message)

    def _on_result(self, res: Any) -> None:
        from engine.measure import optimize

        self.result = res
        rows = optimize.result_table(res)
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                item = QTableWidgetItem(text)
                if j:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        lines = [f"Variant: {res.qtype.upper()} ({res.source}), {res.matrices - res.fallbacks} of {res.matrices} "
                 f"weight matrices in that type.",
                 f"Target alone {res.target_tokens_per_s:.1f} tok/s; verify cost per batch size: "
                 f"{optimize.verify_curve_line(res.verify_s)}."]
        lines += [f"Break-even: {line}." for line in optimize.break_even_lines(res.break_even)]
        lines += [f"Note: {n}." for n in res.notes]
        self.details.setText("\n".join(lines))
        self.verdict.setText(res.verdict + (f" — the pair now drafts with {Path(res.variant).name}." if res.kept else "."))
        self.bar.setValue(1000)
        self.status.setText("Done.")
        self.optimized.emit(res)

    def _on_failed(self, message: str) -> None:
        self.status.setText(f"Failed: {message}")

    def _on_finished(self) -> None:
        if self.result is None and not self.status.text().startswith("Failed"):
            self.status.setText("Cancelled; nothing was registered.")
        self._worker = None
        self.start_btn.setEnabled(True)
        self.cancel_btn.setEnabled(False)
        if self._close_when_done:
            self._close_when_done = False
            self.close()
