"""Models: the catalog's pairs (with downloads, loading and unloading) above, the Library's
embedding models apart from them, importing local GGUFs and checking any combination below;
.gguf files dropped anywhere are imported."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QVBoxLayout, QWidget

from engine.models import store
from engine.models.catalog import Catalog
from engine.models.hardware import Hardware

from ...session import Session
from ...widgets.controls.reflow import Reflow
from .compat import CompatPanel
from .embedding import EmbeddingPanel
from .imports import ImportsPanel
from .pairs import PairsPanel


class ModelsView(QWidget):
    message = Signal(str)
    error = Signal(str)

    def __init__(self, session: Session, catalog: Catalog, hw: Hardware, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.catalog = catalog
        self.setAcceptDrops(True)
        self.pairs = PairsPanel(session, catalog, hw)
        self.imports = ImportsPanel(session)
        self.compat = CompatPanel(session)
        self.embedding = EmbeddingPanel(session, catalog)
        self.embedding.setVisible(bool(self.embedding.models))
        split = QSplitter(Qt.Orientation.Vertical)
        QVBoxLayout(self).addWidget(split)
        split.addWidget(self.pairs)
        bottom = QWidget()
        bv = QVBoxLayout(bottom)
        bv.setContentsMargins(0, 0, 0, 0)
        bv.addWidget(self.embedding)
        bl = QHBoxLayout()
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(self.imports, 1)
        bl.addWidget(self.compat, 1)
        bv.addLayout(bl, 1)
        self._reflow = Reflow(self, bl, [self.imports.side_by_side_width, self.compat])  # stacked in a narrow window
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([480, 300])
        for part in (self.pairs, self.embedding, self.imports, self.compat):
            part.message.connect(self.message)
            part.error.connect(self.error)
        self.pairs.statesChanged.connect(self._offer_models)
        self.imports.imported.connect(self._offer_models)
        self.imports.forgotten.connect(self._offer_models)
        self.compat.loadStarted.connect(self.pairs.show_loading)
        self.refresh()

    def set_dark(self, dark: bool) -> None:
        for part in (self.pairs, self.embedding, self.imports, self.compat):
            part.set_dark(dark)

    def refresh(self) -> None:
        """Re-read what is on disk: pair states, imported models, the combination lists."""
        self.pairs.rescan()  # -> statesChanged -> _offer_models
        self.embedding.refresh()
        self.imports.refresh()

    def _offer_models(self, *_: Any) -> None:
        """Downloaded catalog models and imported files, for the combination check."""
        entries: list[tuple[str, str]] = []
        for m in self.catalog.models.values():
            if m.kind != "chat":  # an embedding model neither targets nor drafts
                continue
            try:
                p = store.locate_model(m)
            except OSError:
                p = None
            if p is not None:
                entries.append((f"{m.title} ({m.quant})", str(p)))
        entries += [(f"{m.name} — imported", m.path) for m in self.imports.models() if m.exists]
        self.compat.set_choices(entries)

    # -- drag and drop -------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _gguf_paths(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: Any) -> None:
        if _gguf_paths(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = _gguf_paths(event.mimeData())
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        for p in paths:
            self.imports.import_file(p)


def _gguf_paths(mime: Any) -> list[str]:
    if mime is None or not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile().lower().endswith(".gguf")]
