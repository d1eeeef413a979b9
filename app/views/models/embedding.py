"""The catalog's embedding models (the Library ranks passages by meaning with one), apart from
the pairs: they are never a target, a draft or a chat model. One row each: title, size, what
is on disk, Download (through the session's one download path, as a `OneModel`: the same
progress, cancel, resume and sha256 check as a pair) and Delete…."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QGroupBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from engine.errors import StoreError
from engine.models import partial, store
from engine.models.catalog import Catalog, ModelSpec
from engine.units import human_bytes

from ... import theme
from ...downloads.job import DownloadStatus, OneModel
from ...session import Session
from ...widgets.controls.steady import fit_texts
from .files import confirm, why_not_delete
from .pairs import DOWNLOAD_TEXTS


def _ours(st: DownloadStatus | None) -> bool:
    return st is not None and isinstance(st.pair, OneModel)


class EmbeddingPanel(QGroupBox):
    """A row per catalog embedding model, with a bar and Cancel while one downloads."""

    message = Signal(str)
    error = Signal(str)
    statesChanged = Signal()  # an embedding model arrived or was deleted: the Library looks again

    def __init__(self, session: Session, catalog: Catalog, parent: QWidget | None = None):
        super().__init__("Embedding models, for the Library", parent)  # short: a group's title is its minimum width
        self.setToolTip("The Library ranks passages by meaning, beside their words, with one on disk "
                        "(Library page: Rank passages by)")
        self.session = session
        self.models = catalog.embedding_models
        self.states: dict[str, str] = {}  # model id -> store.model_state ("verified", "present", "missing")
        self.partials: dict[str, partial.PartialModel | None] = {}
        self.dark = False
        lay = QVBoxLayout(self)
        grid = QGridLayout()
        self.rows: dict[str, tuple[QLabel, QPushButton, QPushButton]] = {}
        for r, m in enumerate(self.models):
            info = QLabel("")  # title, quant, size and what is on disk (_sync)
            info.setToolTip(f"{m.repo} · {m.files[0].filename} · license {m.license}")
            info.setWordWrap(True)  # a narrow window wraps it instead of scrolling sideways
            info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            download = QPushButton("Download")
            fit_texts(download, DOWNLOAD_TEXTS)
            download.setToolTip("Fetch it (resumes a partial download; every file is checked by sha256)")
            download.clicked.connect(lambda _=False, m=m: self.download(m))
            delete = QPushButton("Delete…")
            delete.setToolTip("Remove its file (or what a stopped download left) from the model cache (asks first)")
            delete.clicked.connect(lambda _=False, m=m: self.delete(m))
            for c, w in enumerate((info, download, delete)):
                grid.addWidget(w, r, c)
            self.rows[m.id] = (info, download, delete)
        grid.setColumnStretch(0, 1)
        lay.addLayout(grid)
        bar = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop the download; from Hugging Face the partial file is kept and Resume continues it")
        self.cancel_btn.clicked.connect(self.session.downloads.cancel)
        bar.addWidget(self.progress, 1)
        bar.addWidget(self.cancel_btn)
        self.line = QLabel("")
        self.line.setWordWrap(True)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addLayout(bar)
        lay.addWidget(self.line)
        self._show_bar(False)
        self._show_line("")
        dl = session.downloads
        dl.changed.connect(self._download_changed)
        dl.finished.connect(self._download_finished)
        dl.failed.connect(self._download_failed)
        self.refresh()

    def set_dark(self, dark: bool) -> None:
        self.dark = dark
        self.refresh()

    def state_word(self, m: ModelSpec) -> str:
        """'not downloaded', 'on disk, sha256 verified', '40.0 MB of 146.1 MB (partial)'…"""
        pm = self.partials.get(m.id)
        st = self.states.get(m.id, "missing")
        if st == "missing" and pm is not None:
            return f"{human_bytes(pm.on_disk)} of {human_bytes(m.bytes)} (partial)" if pm.resumable \
                else f"{human_bytes(pm.freeable)} left by a cut download"
        return store.STATE_WORDS.get(st, st)

    def refresh(self) -> None:
        """Look at the cache again: each row's state and buttons."""
        for m in self.models:
            try:
                self.states[m.id], self.partials[m.id] = store.model_state(m), partial.model_partial(m)
            except OSError as e:  # an unreadable cache folder must not break the page
                self.states[m.id], self.partials[m.id] = "missing", None
                self._show_line(f"Cannot read the model cache: {e.strerror or e}")
        self._sync()

    def _sync(self) -> None:
        downloading = self.session.downloads.active
        pal = theme.palette(self.dark)  # green on disk, orange partial: as the pairs table colours them
        for m in self.models:
            info, download, delete = self.rows[m.id]
            st, pm = self.states.get(m.id, "missing"), self.partials.get(m.id)
            ok = st != "missing"
            word = escape(self.state_word(m))
            colour = pal.good if ok else pal.warn if pm is not None else ""
            info.setText(f"<b>{escape(m.title)}</b> · {m.quant} · {human_bytes(m.bytes)} · "
                         + (f"<span style='color: {colour}'>{word}</span>" if colour else word))
            download.setText("Verify files" if ok else "Resume" if pm is not None and pm.resumable else "Download")
            download.setEnabled(not downloading)
            delete.setEnabled(not downloading and (ok or pm is not None))
        self.cancel_btn.setEnabled(downloading and _ours(self.session.downloads.status))

    # -- downloads -----------------------------------------------------------------------
    def download(self, m: ModelSpec) -> bool:
        """Fetch `m` through the session's download (one at a time, whatever started it)."""
        if not self.session.downloads.download(OneModel(m)):
            running = self.session.downloads.status
            self.message.emit(f"Already downloading {running.pair.title if running else ''}")
            return False
        return True

    def _show_bar(self, shown: bool) -> None:
        self.progress.setVisible(shown)
        self.cancel_btn.setVisible(shown)

    def _download_changed(self, st: DownloadStatus) -> None:
        if _ours(st):
            self._show_bar(st.bar_visible)
            self.progress.setValue(round(1000 * st.fraction))
            self.progress.setFormat(st.bar_format)
            self._show_line(st.text)
        self._sync()

    def _download_finished(self, st: DownloadStatus) -> None:
        self.refresh()
        if _ours(st):
            self._show_bar(False)
            if st.headline:
                self.message.emit(st.headline)
            self.statesChanged.emit()

    def _download_failed(self, message: str) -> None:
        if _ours(self.session.downloads.status):
            self.error.emit(message)

    # -- files on disk -------------------------------------------------------------------
    def delete(self, m: ModelSpec) -> bool:
        """After a confirmation, remove the model's files (a partly downloaded one: its
        unfinished files only). True when files were deleted."""
        if self.session.downloads.active:
            return self._say("A download is running; delete when it has finished")
        whole = store.model_state(m) != "missing"
        pm = None if whole else partial.model_partial(m)
        if not whole and pm is None:
            self.refresh()
            return self._say(f"Nothing of {m.title} is on disk")
        why = why_not_delete(self.session, [store.locate_model(m)])
        if why:
            return self._say(f"Not deleting {m.title}: {why}")
        size = human_bytes(m.bytes if whole else pm.freeable)  # type: ignore[union-attr]
        what = f"{m.title} ({size})" if whole else f"the partial download of {m.title} ({size})"
        if not confirm(self, "Delete model", f"Delete {what} from the Tandem model cache ({store.hub_cache()})?\n\n"
                       "The Library then ranks passages by their words alone. Download fetches it again."):
            return False
        try:
            freed = store.delete_model(m) if whole else partial.delete_partial(m)
        except (StoreError, OSError) as e:
            self.refresh()
            self.statesChanged.emit()
            return self._say(str(e), error=True)
        self.refresh()
        self.statesChanged.emit()
        self._say(f"Deleted {what}: {human_bytes(freed)} freed")
        return True

    def _show_line(self, text: str) -> None:
        """The download's line, or what Delete did; no room taken while there is none."""
        self.line.setText(text)
        self.line.setVisible(bool(text))

    def _say(self, text: str, *, error: bool = False) -> bool:
        self._show_line(text)
        (self.error if error else self.message).emit(text)
        return False
