"""The Library page's "Rank passages by" control: words only, the catalog's embedding model
(greyed, with a link to the Models page, while it is not downloaded), or another GGUF file.
The choice is the shelf's setting (library/embed_model) and takes effect without a restart;
the line beside it says what ranks the folders now."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QPalette, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from engine.errors import TandemError
from engine.models.catalog import Catalog, ModelSpec
from engine.units import human_bytes

from ...library_shelf import LibraryShelf

WORDS = "none"
OTHER = "\0other"  # the item that opens the file dialog (no setting is ever this)


def _catalog_models(catalog: Catalog | None) -> list[ModelSpec]:
    if catalog is None:
        from engine.models import catalog as catalog_mod

        try:
            catalog = catalog_mod.load()
        except TandemError:
            return []
    return catalog.embedding_models


class RankingChoice(QWidget):
    """"Rank passages by: [choice]" and, under it, the state of that choice in one line."""

    showModels = Signal()  # the user asked for the Models page (to download the model)

    def __init__(self, shelf: LibraryShelf, catalog: Catalog | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.shelf = shelf
        self.models = _catalog_models(catalog)
        self.on_disk: dict[str, bool] = {}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        label = QLabel("Rank passages by")
        self.combo = QComboBox()
        self.combo.setToolTip("Words: the passages sharing the question's words (BM25). An embedding model adds "
                              "the passages nearest in meaning, so a question in other words still finds them")
        label.setBuddy(self.combo)
        self.state = QLabel("")
        self.state.setWordWrap(True)
        self.state.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.state.linkActivated.connect(lambda _link: self.showModels.emit())
        row.addWidget(label)
        row.addWidget(self.combo)
        row.addStretch(1)
        lay.addLayout(row)
        lay.addWidget(self.state)  # its own line: a long reason never squeezes the choice
        self.combo.activated.connect(self._chosen)
        shelf.rankingChanged.connect(self.show_state)
        self.refresh()

    # -- the list --------------------------------------------------------------------------
    def refresh(self) -> None:
        """The items again (which catalog model is on disk), the setting's one current."""
        from engine.models import store

        for m in self.models:
            try:
                self.on_disk[m.id] = store.locate_model(m) is not None
            except OSError:
                self.on_disk[m.id] = False
        choice = self.shelf.embed_choice()
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem("Words only", WORDS)
        model = self.combo.model()
        for i, m in enumerate(self.models):
            here = self.on_disk[m.id]
            self.combo.addItem(f"Meaning and words: {m.title}" + ("" if here else " — not downloaded"),
                               "" if i == 0 else m.id)
            if not here and isinstance(model, QStandardItemModel):
                model.item(self.combo.count() - 1).setEnabled(False)  # greyed: the line says where to get it
        if self._is_file(choice):
            self.combo.addItem(f"Meaning and words: {Path(choice).name}", choice)
            self.combo.setItemData(self.combo.count() - 1, choice, Qt.ItemDataRole.ToolTipRole)
        self.combo.addItem("Another GGUF file…", OTHER)
        self.combo.setCurrentIndex(self._index_of(choice))
        self.combo.blockSignals(False)
        self.show_state()

    def _is_file(self, choice: str) -> bool:
        return bool(choice) and choice.lower() not in (WORDS, "off") and all(choice != m.id for m in self.models)

    def _index_of(self, choice: str) -> int:
        if choice.lower() in (WORDS, "off"):
            return 0
        if self.models and choice == self.models[0].id:
            choice = ""
        i = self.combo.findData(choice)
        return i if i >= 0 else 0

    # -- choosing ----------------------------------------------------------------------------
    def _chosen(self, index: int) -> None:
        data = self.combo.itemData(index)
        if data == OTHER:
            path, _ = QFileDialog.getOpenFileName(self, "Choose an embedding model", "",
                                                  "GGUF models (*.gguf);;All files (*)")
            if not path:
                self.refresh()  # the current choice again
                return
            data = path
        self.choose(str(data))

    def choose(self, choice: str) -> None:
        """Use `choice` ("none", "" for the catalog's model, or a GGUF path) from now on."""
        self.shelf.set_embed_choice(choice)
        self.refresh()

    # -- what ranks now ----------------------------------------------------------------------
    def state_text(self) -> str:
        choice = self.shelf.embed_choice()
        if choice.lower() in (WORDS, "off"):
            return "Passages sharing the question's words come first (BM25)."
        if self.shelf.embed_problem:
            return f"Ranked by words alone: {self.shelf.embed_problem}"
        embedder = self.shelf.embedder
        if embedder is not None:
            return f"Ranked by meaning and words ({embedder.path.name})."
        if not choice and self.models and not any(self.on_disk.values()):
            m = self.models[0]
            link = self.palette().color(QPalette.ColorRole.Link).name()  # the theme's: readable on dark too
            return (f"Not downloaded ({human_bytes(m.bytes)}): <a href='models' style='color: {link}'>Download it on "
                    "the Models page</a>. "
                    "Until then passages are ranked by their words.")
        if not self.shelf.folders():
            return "Loaded when a folder is indexed."
        return "Loading the model; ranked by words until it is ready…"

    def show_state(self) -> None:
        text = self.state_text()
        self.state.setTextFormat(Qt.TextFormat.RichText if "<a " in text else Qt.TextFormat.PlainText)
        self.state.setText(text)
        self.state.setToolTip(text if "<a " not in text else "")

    def changeEvent(self, event: QEvent) -> None:
        """The theme changed: the link takes the new palette's colour."""
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.show_state()
