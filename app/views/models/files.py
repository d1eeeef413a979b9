"""What the Models page's Delete and Show in folder share: which files the loaded pair
uses (they must not be deleted under it), a confirmation, and opening a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMenu, QMessageBox, QPushButton, QTableView, QWidget

from engine.decoding.drafting.choice import DraftChoice

from ...session import Session


def loaded_files(session: Session) -> set[Path]:
    """The model files the loaded pair reads, resolved (a lookup or no-draft pair: the target)."""
    pair = session.pair
    if pair is None:
        return set()
    files = [pair.target]
    draft = DraftChoice.parse(pair.draft).path
    if draft is not None:
        files.append(draft)
    return {Path(p).resolve() for p in files}


def why_not_delete(session: Session, paths: Iterable[Path | None]) -> str:
    """"" when the files may go; else why not (the loaded pair reads one, or a pair is loading)."""
    if session.busy == "loading":
        return "a pair is loading; try again when it has loaded"
    used = loaded_files(session)
    if any(p is not None and Path(p).resolve() in used for p in paths):
        return "it is loaded: Unload it first"
    return ""


def confirm(parent: QWidget, title: str, text: str) -> bool:
    """A Yes/Cancel question; Cancel is the default, so Enter never deletes by accident."""
    answer = QMessageBox.question(parent, title, text,
                                  QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                                  QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Yes


def show_in_folder(path: Path) -> bool:
    """Open the folder holding `path` (or `path` itself when it is a folder) in the file manager."""
    folder = path if path.is_dir() else path.parent
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))


def file_buttons(delete_tip: str, folder_tip: str, on_delete: Callable[[], object],
                 on_folder: Callable[[], object]) -> tuple[QPushButton, QPushButton]:
    """The "Delete…" and "Show in folder" buttons every model list has."""
    delete = QPushButton("Delete…")
    delete.setToolTip(delete_tip)
    delete.clicked.connect(lambda: on_delete())
    folder = QPushButton("Show in folder")
    folder.setToolTip(folder_tip)
    folder.clicked.connect(lambda: on_folder())
    return delete, folder


def row_menu(table: QTableView, buttons: Iterable[QPushButton]) -> QMenu:
    """A right-click menu on the table's rows with the same actions as `buttons` (each
    enabled as its button is): the row under the pointer is selected first."""
    menu = QMenu(table)
    pairs = [(menu.addAction(b.text()), b) for b in buttons]
    for action, button in pairs:
        action.setToolTip(button.toolTip())
        action.triggered.connect(button.click)

    def show(pos: QPoint) -> None:
        idx = table.indexAt(pos)
        if not idx.isValid():
            return
        table.selectRow(idx.row())
        for action, button in pairs:
            action.setText(button.text())  # "Download" reads "Verify files" once a pair is on disk
            action.setEnabled(button.isEnabled())
        menu.popup(table.viewport().mapToGlobal(pos))

    table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    table.customContextMenuRequested.connect(show)
    return menu
