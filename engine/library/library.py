"""A folder as a library: its index (store.py), kept current (indexer.py) and searched
(search.py). `tandem ask` updates by modification time before each question; a long-lived
process passes `watch=True`, and an update then reads only the paths the watcher saw change
(the first update still walks the folder once). With an `embedder` (vectors.py), an update
also gives every new passage its vector, and a search fuses BM25 with the nearest passages."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable

from ..errors import DocumentError, TandemError
from .indexer import Indexer, IndexReport, Progress, private_folders
from .search import Hit, search
from .store import IndexStore, counts, index_path, unreadable
from .vectors import Embedder, embed_missing, vector_count


class Library:
    """One folder, its index file (default: under Tandem's data folder, `index_path`), and
    optionally a watch on it and an embedding model. Close it when done (the watch's thread,
    the database; the embedder is the caller's to close: several libraries may share one)."""

    def __init__(self, folder: str | Path, index: Path | None = None, *, watch: bool = False,
                 embedder: Embedder | None = None):
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise DocumentError(f"{folder}: not a folder" if self.folder.exists() else f"{folder}: no such folder")
        self.folder = self.folder.resolve()
        self.index = Path(index) if index is not None else index_path(self.folder)
        self.store = IndexStore(self.index, self.folder)
        excluded = private_folders(self.folder, self.index)
        self._indexer = Indexer(self.folder, self.store, excluded)
        self._walked = False  # a first full update has finished (then a watch's changes suffice)
        self.embedder = embedder
        self.watch = None
        if watch:
            from .watch import FolderWatch

            self.watch = FolderWatch(self.folder, excluded)

    def update(self, progress: Progress | None = None, cancelled: Callable[[], bool] = lambda: False) -> IndexReport:
        """Bring the index up to date: with a watch, only what it saw change since the last
        update (nothing: no file is touched); otherwise every file's size and time compared."""
        only = None
        try:
            if self.watch is not None and self._walked:
                only = self.watch.take()
                if only is not None and not only:
                    return self._embed(self._report(), progress, cancelled)
            elif self.watch is not None:
                self.watch.take()  # the walk below sees everything noted so far
            report = self._indexer.update(progress, cancelled, only)
            self._walked = not report.cancelled  # a cut update forgot what it took: the next one walks
            return report if report.cancelled else self._embed(report, progress, cancelled)
        except sqlite3.DatabaseError as e:
            raise self._damaged(e) from None

    def _embed(self, report: IndexReport, progress: Progress | None, cancelled: Callable[[], bool]) -> IndexReport:
        """The passages without a vector embedded (none without an embedder); a cancel keeps those done."""
        if self.embedder is not None:
            report.embedded, report.vectors_left_out, cut = embed_missing(self.store, self.embedder, progress,
                                                                          cancelled)
            report.cancelled = report.cancelled or cut
            report.vectors = vector_count(self.store.db)
        return report

    def _report(self) -> IndexReport:
        report = IndexReport()
        report.files, report.passages = self.store.counts()
        report.unreadable = self.store.unreadable()
        report.unchanged = report.files
        return report

    def search(self, question: str, top: int = 6) -> list[Hit]:
        """The best `top` passages for `question` from this thread (its own connection): BM25
        fused with the nearest vectors when there is an embedder, else BM25 alone."""
        if self.embedder is None:
            return self._read(lambda db: search(db, question, top))
        vector = (self.embedder.name, self.embedder.embed([question], query=True)[0])
        return self._read(lambda db: search(db, question, top, vector))

    def held(self) -> IndexReport:
        """What the index holds now (files read, passages, the unreadable files with why),
        read from this thread (its own connection), so it may be asked while an update runs."""
        report = IndexReport()
        report.files, report.passages = self._read(counts)
        report.unreadable = self._read(unreadable)
        report.vectors = self._read(vector_count) if self.embedder is not None else 0
        return report

    def _read(self, read: Callable[[sqlite3.Connection], Any]) -> Any:
        try:
            db = sqlite3.connect(self.index)
            try:
                return read(db)
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise self._damaged(e) from None

    def _damaged(self, e: sqlite3.DatabaseError) -> TandemError:
        return TandemError(f"the library index {self.index} cannot be used ({e}); delete it to rebuild it "
                           "from the folder")

    def unreadable(self) -> list[tuple[str, str]]:
        return self.store.unreadable()

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
        self.store.close()

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
