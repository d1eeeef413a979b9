"""Importing local GGUFs: validate the file in a worker, show what its header says (the
same description `tandem import` prints), register it with the store, list the registry;
forget an imported file (the file stays where it is) or show it in its folder."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView, QFileDialog, QGroupBox, QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableView,
    QVBoxLayout, QWidget,
)

from engine.models import gguf_header, store
from engine.units import human_bytes

from ... import theme, workers
from ...session import Session
from ...widgets.controls.reflow import WrappingLabel
from ...widgets.controls.table_model import RowsTableModel
from .files import confirm, file_buttons, row_menu, show_in_folder, why_not_delete

GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"
Index = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True)
class Imported:
    """A registered GGUF and what its header says, as (label, value) rows."""

    record: store.ImportedModel
    facts: list[tuple[str, str]]

    def fact(self, label: str) -> str | None:
        return dict(self.facts).get(label)


def import_file(path: Path) -> Imported:
    """Worker side of an import: validate (ModelFileError names the cause), describe, register."""
    header = gguf_header.validate_file(path)
    rec = store.register_import(path, header=header)
    return Imported(rec, gguf_header.describe(header))


class ImportsModel(RowsTableModel):
    """Local GGUFs registered with `tandem import` or on this page (store.ImportedModel rows)."""

    COLUMNS = ["Name", "Architecture", "Size", "File"]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        m: store.ImportedModel = self.rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return [m.name + ("" if m.exists else "  (file missing)"), m.architecture, human_bytes(m.size),
                    Path(m.path).name][index.column()]
        if role == Qt.ItemDataRole.ToolTipRole:
            return m.path
        return None


class ImportsPanel(QGroupBox):
    """The import button, what the last import's header said, and the registry's table."""

    message = Signal(str)
    error = Signal(str)
    imported = Signal(object)  # Imported
    forgotten = Signal(str)  # the path of a file removed from the registry

    def __init__(self, session: Session, parent: QWidget | None = None):
        super().__init__("Import a local GGUF", parent)
        self.session = session
        self.dark = False
        self.last_import: Imported | None = None
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.import_btn = QPushButton("Import GGUF…")
        self.import_btn.clicked.connect(lambda: self.import_file())
        hint = WrappingLabel("or drop .gguf files anywhere on this page")
        hint.setObjectName("hint")  # it wraps rather than widening the Models page past a 1024-px window
        self.forget_btn, self.folder_btn = file_buttons(
            "Remove the selected file from Tandem's list; the file itself stays where it is",
            "Open the folder holding the selected file", self.forget_selected, self.show_selected_folder)
        self.hint = hint
        row.addWidget(self.import_btn)
        row.addWidget(hint, 1)
        row.addWidget(self.forget_btn)
        row.addWidget(self.folder_btn)
        self.info = QLabel("")
        self.info.setWordWrap(True)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.model = ImportsModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(ImportsModel.COLUMNS)):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self.sync_buttons())
        self.model.modelReset.connect(self.sync_buttons)
        self.row_menu = row_menu(self.table, [self.forget_btn, self.folder_btn])
        lay.addLayout(row)
        lay.addWidget(self.info)
        lay.addWidget(self.table, 1)
        self.sync_buttons()

    def side_by_side_width(self) -> int:
        """The width this panel needs beside another: its buttons in one row and the drop hint
        on at most two lines (its minimum alone would let the hint wrap a word a line)."""
        buttons = sum(b.sizeHint().width() for b in (self.import_btn, self.forget_btn, self.folder_btn))
        hint = self.hint.fontMetrics().horizontalAdvance(self.hint.text()) // 2
        return buttons + hint + 4 * max(self.layout().spacing(), 6) + 24  # spacing, the box's frame and margins

    def set_dark(self, dark: bool) -> None:
        self.dark = dark

    def models(self) -> list[store.ImportedModel]:
        """The registry (files that vanished are listed and marked)."""
        return store.imported_models()

    def refresh(self) -> None:
        self.model.set_rows(self.models())

    def selected(self) -> store.ImportedModel | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.rows[rows[0].row()] if rows else None

    def sync_buttons(self) -> None:
        m = self.selected()
        self.forget_btn.setEnabled(m is not None)
        self.folder_btn.setEnabled(m is not None and m.exists)

    def forget_selected(self) -> bool:
        """Forget the selected import after a confirmation; the user's file is never deleted.
        Refused while the loaded pair reads it."""
        m = self.selected()
        if m is None:
            self.message.emit("Select an imported model first")
            return False
        why = why_not_delete(self.session, [Path(m.path)])
        if why:
            self.message.emit(f"Not removing {m.name}: {why}")
            return False
        text = (f"Remove {m.name} from Tandem's imported models?\n\nYour file is not deleted: it stays at\n{m.path}\n"
                "and can be imported again at any time.")
        if not confirm(self, "Remove imported model", text):
            return False
        try:
            store.forget_import(m.path)
        except OSError as e:
            self.error.emit(f"cannot update the import registry: {e}")
            return False
        self.refresh()
        self.message.emit(f"Removed {m.name} from the list; the file stays at {m.path}")
        self.forgotten.emit(m.path)
        return True

    def show_selected_folder(self) -> bool:
        m = self.selected()
        if m is None or not m.exists:
            self.message.emit("Select an imported model whose file exists")
            return False
        if not show_in_folder(Path(m.path)):
            self.error.emit(f"Could not open {Path(m.path).parent}")
            return False
        return True

    def import_file(self, path: str | Path | None = None) -> None:
        """Validate a local GGUF in a worker, show its metadata, register it."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import a GGUF model", "", GGUF_FILTER)
            if not path:
                return
        p = Path(path).expanduser()
        self.info.setText(f"Reading {escape(p.name)}…")
        w = workers.CallWorker(lambda p=p: import_file(p))
        w.result.connect(self._on_imported)
        w.failed.connect(self._on_failed)
        self.session.run(w)

    def _on_imported(self, imp: Imported) -> None:
        self.last_import = imp
        rec = imp.record
        facts = [f"{escape(label)} <b>{escape(value)}</b>" for label, value in imp.facts if label != "name"]
        self.info.setText(
            f"<b>{escape(rec.name)}</b> — {escape(Path(rec.path).name)}, {human_bytes(rec.size)}<br>"
            + " · ".join(facts) + "<br><i>registered (also listed by <code>tandem models</code>)</i>")
        self.refresh()
        self.message.emit(f"Imported {rec.name}")
        self.imported.emit(imp)

    def _on_failed(self, msg: str) -> None:
        self.info.setText(f"<span style='color:{theme.palette(self.dark).bad}'>Not imported:</span> {escape(msg)}")
        self.error.emit(msg)
