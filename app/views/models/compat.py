"""Check any target/draft combination (engine.models.compat.check_pair on the two GGUF headers, in
a worker) and load it as a pair when it is compatible. Any target can also be loaded with
prompt lookup or with no draft at all: those need no second model."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFileDialog, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine.models import gguf_header
from engine.models.compat import Verdict, check_pair

from ... import theme, workers
from ...session import Session
from .imports import GGUF_FILTER

PICK_HINT = ("Pick a target and a draft: downloaded catalog models, imported files, or any GGUF; "
             "or Prompt lookup / No draft for a single model.")
# Draft choices that are not a model file: (label, key, what it means).
MODEL_FREE_DRAFTS = [
    ("Prompt lookup (no draft model)", "lookup", "prompt lookup drafts by copying from the prompt and earlier text"),
    ("No draft (target alone)", "none", "the target writes every token itself"),
]
_FREE = {key: about for _label, key, about in MODEL_FREE_DRAFTS}


def check(target: str, draft: str) -> tuple[str, str, Verdict]:
    """Worker side: the verdict, with the two paths it is about. Prompt lookup and no draft
    work with any target: only the target file is validated."""
    if draft in _FREE:
        gguf_header.validate_file(Path(target))
        return target, draft, Verdict(True, notes=[_FREE[draft]])
    return target, draft, check_pair(target, draft)


def draft_label(draft: str) -> str:
    """A file's name, or what a model-free draft choice is called."""
    return {"lookup": "prompt lookup", "none": "no draft"}.get(draft, Path(draft).name)


def _esc(s: str) -> str:
    return escape(s, quote=False)


class CompatPanel(QGroupBox):
    """Two model choosers, Check and Load, and the verdict with its reasons."""

    message = Signal(str)
    error = Signal(str)
    checked = Signal(object)  # engine.models.compat.Verdict for the current combination
    loadStarted = Signal(str)  # the label of the combination being loaded

    def __init__(self, session: Session, parent: QWidget | None = None):
        super().__init__("Check a combination", parent)
        self.session = session
        self.dark = False
        self.choices: list[tuple[str, str]] = []  # (label, path) offered besides browsed files
        self.browsed: list[str] = []
        self._verdict: Verdict | None = None
        self._verdict_for: tuple[str, str] | None = None
        lay = QVBoxLayout(self)
        grid = QGridLayout()
        self.target_combo = QComboBox()
        self.draft_combo = QComboBox()
        for cb in (self.target_combo, self.draft_combo):
            cb.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            cb.setMinimumContentsLength(24)
            cb.currentIndexChanged.connect(lambda _i: self._combination_changed())
        self.target_browse = QPushButton("Browse…")
        self.target_browse.clicked.connect(lambda: self._browse(self.target_combo))
        self.draft_browse = QPushButton("Browse…")
        self.draft_browse.clicked.connect(lambda: self._browse(self.draft_combo))
        grid.addWidget(QLabel("Target"), 0, 0)
        grid.addWidget(self.target_combo, 0, 1)
        grid.addWidget(self.target_browse, 0, 2)
        grid.addWidget(QLabel("Draft"), 1, 0)
        grid.addWidget(self.draft_combo, 1, 1)
        grid.addWidget(self.draft_browse, 1, 2)
        grid.setColumnStretch(1, 1)
        row = QHBoxLayout()
        self.check_btn = QPushButton("Check")
        self.check_btn.setToolTip("Compare the two vocabularies from the GGUF headers (llama.cpp's rules)")
        self.check_btn.clicked.connect(lambda: self.check_combination())
        self.load_btn = QPushButton("Load this combination")
        self.load_btn.clicked.connect(lambda: self.load_combination())
        row.addWidget(self.check_btn)
        row.addWidget(self.load_btn)
        row.addStretch(1)
        self.verdict_label = QLabel(PICK_HINT)
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        lay.addLayout(grid)
        lay.addLayout(row)
        lay.addWidget(self.verdict_label, 1)
        session.busyChanged.connect(self._session_changed)
        session.pairChanged.connect(self._session_changed)

    def set_dark(self, dark: bool) -> None:
        self.dark = dark
        self._show_verdict()

    # -- the two lists -------------------------------------------------------------------
    def set_choices(self, choices: list[tuple[str, str]]) -> None:
        """(label, path) of the models on offer; files chosen with Browse… stay on the lists."""
        self.choices = list(choices)
        self._fill_combos()

    def _fill_combos(self) -> None:
        entries = list(self.choices)
        seen = {path for _, path in entries}
        for b in self.browsed:
            if b not in seen:
                entries.append((Path(b).name, b))
                seen.add(b)
        for cb in (self.target_combo, self.draft_combo):
            current = cb.currentData()
            cb.blockSignals(True)
            cb.clear()
            cb.addItem("— choose a model —", "")
            if cb is self.draft_combo:
                for label, key, about in MODEL_FREE_DRAFTS:
                    cb.addItem(label, key)
                    cb.setItemData(cb.count() - 1, about, Qt.ItemDataRole.ToolTipRole)
            for label, path in entries:
                cb.addItem(label, path)
                cb.setItemData(cb.count() - 1, path, Qt.ItemDataRole.ToolTipRole)
            i = cb.findData(current) if current else 0
            cb.setCurrentIndex(max(i, 0))
            cb.blockSignals(False)
        self.sync_buttons()

    def combination(self) -> tuple[str, str]:
        return str(self.target_combo.currentData() or ""), str(self.draft_combo.currentData() or "")

    def set_combination(self, target: str | Path, draft: str | Path) -> None:
        """Select two files (adding them to the lists if needed)."""
        for cb, path in ((self.target_combo, str(target)), (self.draft_combo, str(draft))):
            if cb.findData(path) < 0 and path not in self.browsed:
                self.browsed.append(path)
        self._fill_combos()
        for cb, path in ((self.target_combo, str(target)), (self.draft_combo, str(draft))):
            cb.blockSignals(True)
            cb.setCurrentIndex(cb.findData(path))
            cb.blockSignals(False)
        self._combination_changed()

    def _browse(self, combo: QComboBox) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a GGUF model", "", GGUF_FILTER)
        if not path:
            return
        if path not in self.browsed:
            self.browsed.append(path)
        self._fill_combos()
        combo.setCurrentIndex(combo.findData(path))

    def _combination_changed(self) -> None:
        self._verdict, self._verdict_for = None, None
        t, d = self.combination()
        if t and d:
            self.check_combination()
        else:
            self.verdict_label.setText(PICK_HINT)
        self.sync_buttons()

    def sync_buttons(self) -> None:
        ok = self._verdict is not None and bool(self._verdict) and self._verdict_for == self.combination()
        self.load_btn.setEnabled(ok and not self.session.busy)
        self.check_btn.setEnabled(all(self.combination()))

    def _session_changed(self, *_: Any) -> None:
        self.sync_buttons()

    # -- checking ------------------------------------------------------------------------
    def check_combination(self, target: str | Path | None = None, draft: str | Path | None = None) -> None:
        """Run engine.models.compat.check_pair on two files in a worker; the verdict appears below."""
        if target is not None and draft is not None:
            self.set_combination(target, draft)  # calls back here with the combos set
            return
        t, d = self.combination()
        if not (t and d):
            self.message.emit("Choose a target and a draft first")
            return
        self.verdict_label.setText(f"Checking {_esc(Path(t).name)} with {_esc(draft_label(d))}…")
        self._run_check(t, d, self._on_checked)

    def _run_check(self, t: str, d: str, on_result: Any) -> None:
        """check(t, d) in a worker; its verdict goes to `on_result`, a failure to the verdict line."""
        w = workers.CallWorker(lambda t=t, d=d: check(t, d))
        w.result.connect(on_result)
        w.failed.connect(self._on_check_failed)
        self.session.run(w)

    def _on_checked(self, res: tuple) -> None:
        t, d, verdict = res
        if (t, d) != self.combination():
            return  # the selection changed meanwhile; a newer check is on its way
        self._verdict, self._verdict_for = verdict, (t, d)
        self._show_verdict()
        self.sync_buttons()
        self.checked.emit(verdict)

    def _on_check_failed(self, msg: str) -> None:
        self._verdict, self._verdict_for = None, None
        self.verdict_label.setText(f"<span style='color:{self._bad()}'><b>✗ Cannot check:</b></span> {_esc(msg)}")
        self.sync_buttons()
        self.error.emit(msg)

    def _bad(self) -> str:
        return theme.palette(self.dark).bad

    def _show_verdict(self) -> None:
        v = self._verdict
        if v is None or self._verdict_for is None:
            return
        t, d = _esc(Path(self._verdict_for[0]).name), _esc(draft_label(self._verdict_for[1]))
        if v.compatible and self._verdict_for[1] in _FREE:
            self.verdict_label.setText(
                f"<span style='color:{theme.palette(self.dark).good}'><b>✓ Ready</b></span>: {t} with {d} "
                f"({_esc(v.notes[0])}); no second model needed.")
        elif v.bridged:
            notes = "".join(f"<li>{_esc(n)}</li>" for n in v.notes)
            self.verdict_label.setText(
                f"<span style='color:{theme.palette(self.dark).good}'><b>✓ Bridged (text)</b></span>: {d} can "
                f"draft for {t} through text (another tokenizer):<ul>{notes}</ul>")
        elif v.compatible:
            notes = "".join(f"<li>{_esc(n)}</li>" for n in v.notes)
            self.verdict_label.setText(
                f"<span style='color:{theme.palette(self.dark).good}'><b>✓ Compatible</b></span>: {d} can draft "
                f"for {t} (same tokenizer and special tokens)." + (f"<ul>{notes}</ul>" if notes else ""))
        else:
            reasons = "".join(f"<li>{_esc(r)}</li>" for r in v.reasons)
            self.verdict_label.setText(
                f"<span style='color:{self._bad()}'><b>✗ Incompatible</b></span>: {d} cannot draft for "
                f"{t}:<ul>{reasons}</ul>")

    # -- loading -------------------------------------------------------------------------
    def load_combination(self, target: str | Path | None = None, draft: str | Path | None = None) -> None:
        """Load any two files as a pair, after checking them (in a worker) first."""
        if target is not None and draft is not None:
            self.set_combination(target, draft)
        t, d = self.combination()
        if not (t and d):
            self.message.emit("Choose a target and a draft first")
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        self._run_check(t, d, self._load_checked)

    def _load_checked(self, res: tuple) -> None:
        t, d, verdict = res
        if not verdict:
            msg = f"{draft_label(d)} cannot draft for {Path(t).name}: " + "; ".join(verdict.reasons)
            self.verdict_label.setText(f"<span style='color:{self._bad()}'><b>✗ Not loaded</b></span>: {_esc(msg)}")
            self.error.emit(msg)
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        if d in _FREE:
            label = f"{Path(t).stem} + {draft_label(d)}"
            self.loadStarted.emit(label)
            self.session.load(Path(t), "lookup" if d == "lookup" else None, label=label)
            return
        label = f"{Path(t).stem} + {Path(d).stem}"
        self.loadStarted.emit(label)
        self.session.load(Path(t), Path(d), label=label)
