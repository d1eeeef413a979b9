"""The Library page: how passages are ranked (ranking.py), a list of folders with one status
line each, the running update's progress, and the unreadable files of the folder chosen, one
line each with why. Nothing here reads a file: the shelf's worker indexes, the engine decides
what is readable."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QShowEvent
from PySide6.QtWidgets import (
    QFileDialog, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QProgressBar, QPushButton, QVBoxLayout, QWidget,
)

from engine.models.catalog import Catalog

from ...library_shelf import FolderState, LibraryShelf
from .ranking import RankingChoice

ROLE_FOLDER = Qt.ItemDataRole.UserRole


def status_line(shelf: LibraryShelf, st: FolderState) -> str:
    """One folder in one line: "briefs: 40 files, 52 passages, 2 unreadable · kept current"."""
    name = shelf.name(st.folder)
    if st.state == "failed":
        return f"{name}: {st.error}"
    if st.state == "indexing":
        where = f" {st.done:,} of {st.total:,}" if st.total else ""
        return f"{name}: indexing{where}" + (f": {st.current}" if st.current else "…")
    counts = f"{st.files:,} file{'s' if st.files != 1 else ''}, {st.passages:,} passages"
    if st.unreadable:
        counts += f", {len(st.unreadable):,} unreadable"
    if st.state == "waiting":
        return f"{name}: waiting to be indexed" + (f" ({counts})" if st.files else "")
    if st.state == "stopped":
        return f"{name}: stopped ({counts} so far; Re-index goes on)"
    if st.vectors:
        counts += ", ranked by meaning too"
    return f"{name}: {counts}" + (" · kept current while Tandem runs" if st.watching else "")


class LibraryView(QWidget):
    message = Signal(str)  # a one-line notice for the status bar
    error = Signal(str)
    showModels = Signal()  # to the Models page (where the embedding model is downloaded)

    def __init__(self, shelf: LibraryShelf, parent: QWidget | None = None, *, catalog: Catalog | None = None):
        super().__init__(parent)
        self.shelf = shelf
        lay = QVBoxLayout(self)
        title = QLabel("<b>Library</b>")
        intro = QLabel(
            "Folders of documents to ask from the chat (choose one under the prompt). Each is indexed on this "
            f"machine, in {shelf.index_folder()}; nothing leaves it. A file saved, added or deleted while Tandem "
            "runs is indexed again by itself.")
        intro.setWordWrap(True)
        intro.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.intro = intro
        row = QHBoxLayout()
        self.add_btn = QPushButton("Add folder…")
        self.reindex_btn = QPushButton("Re-index")
        self.reindex_btn.setToolTip("Read the folder's new and changed files (unchanged ones are not opened)")
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.setToolTip("Stop indexing; what was indexed is kept")
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.setToolTip("Remove the folder from the Library and delete its index (its files stay)")
        self.open_btn = QPushButton("Open index folder")
        self.open_btn.setToolTip("Where the indexes are kept (delete a file there to rebuild that folder's index)")
        self.open_btn.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(shelf.index_folder()))))
        for b in (self.add_btn, self.reindex_btn, self.stop_btn, self.remove_btn):
            row.addWidget(b)
        row.addStretch(1)
        row.addWidget(self.open_btn)
        self.folder_list = QListWidget()
        self.folder_list.setObjectName("libraryFolders")
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.unreadable_title = QLabel("")
        self.unreadable = QListWidget()
        self.unreadable.setObjectName("libraryUnreadable")
        self.unreadable.setWordWrap(True)
        self.empty = QLabel("No folder yet: Add folder… to index one (PDF, Word, spreadsheets, slides, web pages, "
                            "EPUB, RTF, Markdown and text files are read).")
        self.empty.setWordWrap(True)
        self.ranking = RankingChoice(shelf, catalog)
        self.ranking.showModels.connect(self.showModels)
        for w in (title, intro, self.ranking):
            lay.addWidget(w)
        lay.addLayout(row)
        lay.addWidget(self.empty)
        lay.addWidget(self.folder_list, 1)
        lay.addWidget(self.progress)
        lay.addWidget(self.unreadable_title)
        lay.addWidget(self.unreadable, 1)
        self.add_btn.clicked.connect(self.choose_folder)
        self.reindex_btn.clicked.connect(lambda: self._on_chosen(shelf.update))
        self.stop_btn.clicked.connect(shelf.stop)
        self.remove_btn.clicked.connect(lambda: self._on_chosen(self._remove))
        self.folder_list.currentItemChanged.connect(lambda *_: self._show_chosen())
        shelf.changed.connect(self._changed)
        shelf.failed.connect(self.error)
        self.refresh()

    # -- acts ------------------------------------------------------------------------------
    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder to the Library")
        if folder:
            self.add_folder(folder)

    def add_folder(self, folder: str) -> None:
        added = self.shelf.add(folder)
        if added is not None:
            self.refresh()
            self._select(added)
            self.message.emit(f"Indexing {self.shelf.name(added)}…")

    def chosen(self) -> str | None:
        item = self.folder_list.currentItem()
        return item.data(ROLE_FOLDER) if item is not None else None

    def _on_chosen(self, act) -> None:
        folder = self.chosen()
        if folder is not None:
            act(folder)

    def _remove(self, folder: str) -> None:
        self.shelf.remove(folder)
        self.message.emit(f"Removed {self.shelf.name(folder)} from the Library (its files are untouched)")

    # -- showing -----------------------------------------------------------------------------
    def refresh(self) -> None:
        """The folder list again from the shelf, the chosen one kept."""
        keep = self.chosen()
        self.folder_list.blockSignals(True)
        self.folder_list.clear()
        for folder in self.shelf.folders():
            item = QListWidgetItem(status_line(self.shelf, self.shelf.states[folder]), self.folder_list)
            item.setData(ROLE_FOLDER, folder)
            item.setToolTip(folder)
        self.folder_list.blockSignals(False)
        folders = self.shelf.folders()
        self.empty.setVisible(not folders)
        self._select(keep if keep in folders else (folders[0] if folders else None))

    def _select(self, folder: str | None) -> None:
        for i in range(self.folder_list.count()):
            if self.folder_list.item(i).data(ROLE_FOLDER) == folder:
                self.folder_list.setCurrentRow(i)
                break
        self._show_chosen()

    def _changed(self, folder: str) -> None:
        st = self.shelf.states.get(folder)
        for i in range(self.folder_list.count()):
            item = self.folder_list.item(i)
            if item.data(ROLE_FOLDER) == folder:
                if st is None:
                    self.refresh()
                    return
                item.setText(status_line(self.shelf, st))
                break
        else:
            if st is not None:
                self.refresh()
                return
        self._show_progress()
        if folder == self.chosen():
            self._show_chosen()

    def _show_progress(self) -> None:
        running = next((s for s in self.shelf.states.values() if s.state == "indexing"), None)
        self.progress.setVisible(running is not None)
        if running is not None:
            self.progress.setMaximum(max(running.total, 1))
            self.progress.setValue(running.done)
            self.progress.setFormat(f"{self.shelf.name(running.folder)}: %v of %m files")
        self.stop_btn.setEnabled(self.shelf.busy)

    def _show_chosen(self) -> None:
        folder = self.chosen()
        st = self.shelf.states.get(folder) if folder else None
        for b in (self.reindex_btn, self.remove_btn):
            b.setEnabled(st is not None)
        self.unreadable.clear()
        bad = st.unreadable if st is not None else []
        self.unreadable_title.setText(f"Files in {self.shelf.name(folder)} that could not be read "
                                      f"(skipped, the rest indexed):" if bad else "")
        self.unreadable_title.setVisible(bool(bad))
        self.unreadable.setVisible(bool(bad))
        for name, why in bad:
            QListWidgetItem(f"{name}: {why}", self.unreadable).setToolTip(why)
        self._show_progress()

    def models_changed(self) -> None:
        """A model was downloaded or deleted (Models page): the choice's list and the shelf look again."""
        self.ranking.refresh()
        self.shelf.models_changed(fetched=True)

    def showEvent(self, event: QShowEvent) -> None:
        """Shown: a model pulled in a terminal meanwhile is seen too (one that failed is not tried again)."""
        super().showEvent(event)
        self.ranking.refresh()
        self.shelf.models_changed()

    def shutdown(self) -> None:
        self.shelf.shutdown()
