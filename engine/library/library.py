"""A folder as a library: its index (store.py), kept current (indexer.py) and searched
(search.py). `tandem ask` updates by modification time before each question; a long-lived
process passes `watch=True`, and an update then reads only the paths the watcher saw change
(the first update still walks the folder once)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable

from ..errors import DocumentError, TandemError
from .indexer import Indexer, IndexReport, Progress, private_folders
from .search import Hit, search
from .store import IndexStore, counts, index_path, unreadable


class Library:
    """One folder, its index file (default: under Tandem's data folder, `index_path`), and
    optionally a watch on it. Close it when done (the watch's thread, the database)."""

    def __init__(self, folder: str | Path, index: Path | None = None, *, watch: bool = False):
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise DocumentError(f"{folder}: not a folder" if self.folder.exists() else f"{folder}: no such folder")
        self.folder = self.folder.resolve()
        self.index = Path(index) if index is not None else index_path(self.folder)
        self.store = IndexStore(self.index, self.folder)
        excluded = private_folders(self.folder, self.index)
        self._indexer = Indexer(self.folder, self.store, excluded)
        self._walked = False  # a first full update has finished (then a watch's changes suffice)
        self.watch = None
        if watch:
            from .watch import FolderWatch

            self.watch = FolderWatch(self.folder, excluded)

    def update(self, progress: Progress | None = None, cancelled: Callable[[], bool] = lambda: False) -> IndexReport:
        """Bring the index up to date: with a watch, only what it saw change since the last
        update (nothing: no file is touched); otherwise every file's size and time compared."""
        only = None
        if self.watch is not None and self._walked:
            only = self.watch.take()
            if only is not None and not only:
                return self._report()
        elif self.watch is not None:
            self.watch.take()  # the walk below sees everything noted so far
        try:
            report = self._indexer.update(progress, cancelled, only)
        except sqlite3.DatabaseError as e:
            raise self._damaged(e) from None
        self._walked = not report.cancelled  # a cut update forgot what it took: the next one walks
        return report

    def _report(self) -> IndexReport:
        report = IndexReport()
        report.files, report.passages = self.store.counts()
        report.unreadable = self.store.unreadable()
        report.unchanged = report.files
        return report

    def search(self, question: str, top: int = 6) -> list[Hit]:
        """The best `top` passages for `question` from this thread (its own connection)."""
        return self._read(lambda db: search(db, question, top))

    def held(self) -> IndexReport:
        """What the index holds now (files read, passages, the unreadable files with why),
        read from this thread (its own connection), so it may be asked while an update runs."""
        report = IndexReport()
        report.files, report.passages = self._read(counts)
        report.unreadable = self._read(unreadable)
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
