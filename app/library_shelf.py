"""The app's Library: the folders the user added, each an `engine.library.Library` watched
while the app runs, indexed off the GUI thread one folder at a time (workers.IndexWorker),
and asked from the chat. The folders are kept in the window's QSettings; their indexes are
the engine's own files in Tandem's data folder (nothing leaves the machine). Retrieval is
the engine's (`Library.search`): this object only holds the folders and schedules updates.

A folder's watch notes what changed; a timer looks every WATCH_POLL_MS and re-indexes a
folder with changes, so a file saved while the app runs is found at the next question and
a deleted one is gone from the answers.

The embedding model (setting EMBED_KEY: the catalog's once downloaded by default, "none", or
a GGUF path) is loaded by an update's worker, off the GUI thread, and shared by every folder:
their passages are then ranked by meaning beside their words (engine/library/vectors.py). A
model that cannot be used is said once; the folders are then ranked by their words alone. A
new choice (`set_embed_choice`), or the default model arriving or deleted (`models_changed`),
takes effect at once: the folders rank by words until the next update, queued then, has loaded
the new model and embedded what it has not embedded yet; the old model is closed by that update."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QSettings, QTimer, Signal

from engine.errors import TandemError

from . import workers

log = logging.getLogger("tandem.app")
SETTINGS_KEY = "library/folders"
EMBED_KEY = "library/embed_model"  # "": the catalog's embedding model when downloaded; "none"; or a GGUF path / id
WATCH_POLL_MS = 1000


@dataclass
class FolderState:
    """What the Library page shows of one folder. `state`: "waiting", "indexing", "ready",
    "stopped" (a Stop cut the update: what was done is kept) or "failed" (`error` says why)."""

    folder: str
    state: str = "waiting"
    done: int = 0
    total: int = 0
    current: str = ""
    files: int = 0
    passages: int = 0
    vectors: int = 0  # passages ranked by meaning too (an embedding model made their vectors)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    error: str = ""
    watching: bool = False


class LibraryShelf(QObject):
    """The folders, their states, and the one index update running at a time."""

    changed = Signal(str)  # a folder's state changed (added, progress, done, removed)
    failed = Signal(str)  # one line for the window (a folder that cannot be added)
    rankingChanged = Signal()  # the embedding model was chosen, loaded, dropped or failed

    def __init__(self, settings: QSettings, parent: QObject | None = None, *, watch: bool = True):
        super().__init__(parent)
        self._settings, self._watch = settings, watch
        self._libs: dict[str, Any] = {}  # folder -> engine.library.Library
        self.states: dict[str, FolderState] = {}
        self._queue: list[str] = []
        self._worker: workers.IndexWorker | None = None
        self._running: str | None = None
        self._closing = False
        self._orphan: tuple[Any, bool] | None = None  # a removed folder whose update is stopping
        self._thread: Any = None
        self._embedder: Any = None  # engine.llamacpp.text_embedder.TextEmbedder, made by an update
        self._embedder_tried = False  # the choice was tried: loaded, none, or failed (embed_problem)
        self._embed_error = ""  # why the embedding model cannot be used, said once from the GUI thread
        self.embed_problem = ""  # the same, kept for the Library page while that choice stands
        self._embed_gen = 0  # counts choices: a load finished for an older one is not used
        self._embed_lock = threading.Lock()  # the GUI thread's reload against the worker's load
        self._retired: list[Any] = []  # models replaced, closed by the next load (no update runs then)
        self._embed_path: Path | None = None  # the file the default choice loaded (or is loading), None: none on disk
        self._timer = QTimer(self)
        self._timer.setInterval(WATCH_POLL_MS)
        self._timer.timeout.connect(self._poll)
        for folder in self._stored():
            self._open(folder, announce=False)
        self._timer.start()

    # -- the folders -----------------------------------------------------------------------
    def folders(self) -> list[str]:
        return list(self.states)

    def add(self, folder: str) -> str | None:
        """Add `folder` and index it; its resolved path, or None after saying why not."""
        try:
            resolved = str(Path(folder).expanduser().resolve())
        except (OSError, RuntimeError) as e:
            self.failed.emit(f"{folder}: cannot be added ({e})")
            return None
        if resolved in self.states:
            self.update(resolved)
            return resolved
        if not self._open(resolved, announce=True):
            return None
        self._settings.setValue(SETTINGS_KEY, self.folders())
        return resolved

    def remove(self, folder: str, *, delete_index: bool = True) -> None:
        """Forget `folder` (its files are not touched); its index file is deleted too."""
        if folder == self._running and self._worker is not None:
            self._worker.cancel()
        self._queue = [f for f in self._queue if f != folder]
        lib = self._libs.pop(folder, None)
        self.states.pop(folder, None)
        self._settings.setValue(SETTINGS_KEY, self.folders())
        if lib is not None:
            if folder == self._running:  # closed when its update has stopped (_finished)
                self._orphan = (lib, delete_index)
            else:
                self._close(lib, delete_index)
        self.changed.emit(folder)

    def _open(self, folder: str, *, announce: bool) -> bool:
        from engine.library import Library

        lib = None
        watching = self._watch
        try:
            try:
                lib = Library(folder, watch=watching)
            except TandemError as e:
                if not watching or "watchdog" not in str(e):
                    raise
                watching = False  # without watchdog: updated at each question instead
                lib = Library(folder)
        except TandemError as e:
            if announce:
                self.failed.emit(str(e))
                return False
            lib = None  # a stored folder that is gone: listed, failed, so it can be removed
            self.states[folder] = FolderState(folder, "failed", error=str(e))
            return True
        lib.embedder = self._embedder
        self._libs[folder] = lib
        self.states[folder] = FolderState(folder, watching=watching)
        self.update(folder)
        return True

    def _stored(self) -> list[str]:
        value = self._settings.value(SETTINGS_KEY, [])
        if isinstance(value, str):  # QSettings gives one item back as a string
            value = [value]
        return [str(v) for v in value or [] if str(v)]

    # -- updates -----------------------------------------------------------------------------
    def update(self, folder: str) -> None:
        """Index `folder` again (only what changed is read) once the running update is done."""
        if folder not in self._libs or folder in self._queue or self._closing:
            return
        self._queue.append(folder)
        st = self.states[folder]
        if folder != self._running:
            st.state = "waiting"
            self.changed.emit(folder)
        self._next()

    def stop(self) -> None:
        """Stop the running update and the waiting ones (what was indexed is kept)."""
        for folder in self._queue:
            self.states[folder].state = "stopped"
            self.changed.emit(folder)
        self._queue = []
        if self._worker is not None:
            self._worker.cancel()

    @property
    def busy(self) -> bool:
        return self._worker is not None

    def _next(self) -> None:
        if self._worker is not None or not self._queue:
            return
        folder = self._queue.pop(0)
        self._running = folder
        st = self.states[folder]
        st.state, st.done, st.total, st.current, st.error = "indexing", 0, 0, "", ""
        w = workers.IndexWorker(self._libs[folder], prepare=self._load_embedder)
        w.progress.connect(lambda done, total, name, f=folder: self._progress(f, done, total, name))
        w.result.connect(lambda report, f=folder: self._done(f, report))
        w.failed.connect(lambda msg, f=folder: self._failed(f, msg))
        w.finished.connect(self._finished)
        self._worker = w
        self._thread = workers.start(w)
        self.changed.emit(folder)

    def _progress(self, folder: str, done: int, total: int, name: str) -> None:
        st = self.states.get(folder)
        if st is not None:
            st.done, st.total, st.current = done, total, name
            self.changed.emit(folder)

    def _done(self, folder: str, report: Any) -> None:
        st = self.states.get(folder)
        if st is None:
            return
        st.state = "stopped" if report.cancelled else "ready"
        st.files, st.passages, st.unreadable = report.files, report.passages, list(report.unreadable)
        st.vectors = report.vectors
        st.current = ""
        self.changed.emit(folder)

    def _failed(self, folder: str, msg: str) -> None:
        st = self.states.get(folder)
        if st is not None:
            st.state, st.error = "failed", msg
            self.changed.emit(folder)

    def _finished(self) -> None:
        ran = self._running
        self._worker, self._running = None, None
        orphan, self._orphan = self._orphan, None
        if orphan is not None:
            self._close(*orphan)
        if self._embed_error:
            self.failed.emit(self._embed_error)
            self._embed_error = ""
        self.rankingChanged.emit()
        if not self._closing:
            if ran in self.states:
                self.changed.emit(ran)  # no update running now (the page's Stop)
            self._next()

    # -- the embedding model --------------------------------------------------------------
    def embed_choice(self) -> str:
        """The setting: "" (the catalog's embedding model when downloaded), "none", or a GGUF path / id."""
        return str(self._settings.value(EMBED_KEY, "") or "").strip()

    @property
    def embedder(self) -> Any:
        """The loaded embedding model (TextEmbedder), or None: the folders rank by words."""
        return self._embedder

    def set_embed_choice(self, choice: str) -> None:
        """Save a new choice; it takes effect without a restart (see the module's docstring)."""
        choice = choice.strip()
        if choice == self.embed_choice():
            return
        self._settings.setValue(EMBED_KEY, choice)
        self._reload_embedder()

    def models_changed(self, *, fetched: bool = False) -> None:
        """A catalog model arrived or was deleted: with the default choice, the Library takes up
        the embedding model now on disk (or drops the one deleted) without a restart. `fetched`:
        the Models page fetched or deleted one, so a model that failed is tried again (once)."""
        if self.embed_choice() or not self._embedder_tried:
            return  # another choice, or nothing loaded yet (the next update looks anyway)
        path = default_embedding_path()
        if path != self._embed_path or (fetched and path is not None and self.embed_problem):  # or one repaired
            self._reload_embedder()

    def _reload_embedder(self) -> None:
        """Drop the model in use (closed later, by the next load) and re-index every folder."""
        with self._embed_lock:
            self._embed_gen += 1
            self._embedder_tried = False
            self.embed_problem = self._embed_error = ""
            if self._embedder is not None:
                self._retired.append(self._embedder)
            self._embedder = None
            for lib in self._libs.values():
                lib.embedder = None  # ranked by words until the new model is loaded
        self.rankingChanged.emit()
        for folder in list(self._libs):
            self.update(folder)

    def _load_embedder(self) -> None:
        """On the index worker's thread, once per choice: the embedding model the setting names
        (or the catalog's on disk) loaded and handed to every folder; a failure is kept to be said."""
        with self._embed_lock:
            if self._embedder_tried:
                return
            self._embedder_tried = True
            gen, retired, self._retired = self._embed_gen, self._retired, []
        for old in retired:
            old.close()
        from engine.llamacpp.text_embedder import library_embedder

        choice = self.embed_choice() or None
        self._embed_path = default_embedding_path() if choice is None else None  # models_changed compares it
        try:
            embedder, problem = library_embedder(choice), ""
        except TandemError as e:
            log.warning("the Library's embedding model cannot be used: %s", e)
            embedder, problem = None, str(e)
        with self._embed_lock:
            if gen != self._embed_gen:  # the choice changed while this one loaded: closed by the next load
                if embedder is not None:
                    self._retired.append(embedder)
                return
            self._embedder, self.embed_problem = embedder, problem
            self._embed_error = f"The Library ranks by words alone: {problem}" if problem else ""
            for lib in list(self._libs.values()):
                lib.embedder = embedder

    def _poll(self) -> None:
        """Re-index a watched folder whose files changed (the watch noted them)."""
        for folder, lib in self._libs.items():
            if lib.watch is not None and lib.watch.dirty and folder != self._running:
                self.update(folder)

    # -- asking ------------------------------------------------------------------------------
    def search(self, folder: str, question: str, top: int = 6) -> list:
        """The engine's best passages of `folder` for `question` (engine.library.Hit), from the
        index as it is (a watched folder's changes are indexed within a second or two)."""
        lib = self._libs.get(folder)
        if lib is None:
            st = self.states.get(folder)
            raise TandemError(st.error if st is not None and st.error else f"{folder}: not in the Library")
        return lib.search(question, top)

    def name(self, folder: str) -> str:
        return Path(folder).name or folder

    def index_folder(self) -> Path:
        from engine import paths

        return paths.library_dir()

    # -- the end -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """The window closes: the update stops (what was indexed is kept), the watches end."""
        self._closing = True
        self._timer.stop()
        self._queue = []
        if self._worker is not None:
            self._worker.cancel()
            if self._thread is not None:
                self._thread.wait(10_000)  # the update ends at the next file; its database then closes
        for lib in self._libs.values():
            self._close(lib, False)
        self._libs = {}
        for embedder in self._retired + [self._embedder]:
            if embedder is not None:
                embedder.close()
        self._embedder, self._retired = None, []

    @staticmethod
    def _close(lib: Any, delete_index: bool) -> None:
        try:
            lib.close()
        except Exception:  # noqa: BLE001 - a watch or database that will not close is not worth a crash
            log.warning("closing the library of %s failed", lib.folder, exc_info=True)
        if delete_index:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{lib.index}{suffix}").unlink(missing_ok=True)


def default_embedding_path() -> Path | None:
    """The file of the catalog's first embedding model on disk (what the default choice loads), or None."""
    from engine.models import catalog, store

    try:
        specs = catalog.load().embedding_models
        return next((p for p in (store.locate_model(m) for m in specs) if p is not None), None)
    except (TandemError, OSError):
        return None
