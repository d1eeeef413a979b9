"""Bring a folder's index up to date: new and changed files read (through engine/documents/),
deleted ones dropped, unchanged ones left alone. A file whose size and modification time are
as indexed is not opened; one whose time changed but whose content digest did not is not read
again. Progress is reported per file, a cancel is honoured between files (what was done is
kept), and an unreadable file is recorded with its one-line reason instead of stopping the run."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..documents import read_document
from ..documents.reader import EXTENSIONS, MAX_DOCUMENT_BYTES
from ..errors import DocumentError
from .chunks import passages
from .store import FileRecord, IndexStore

MAX_FILES = 50_000  # files considered in one folder; past it the rest are left out, and the report says so
COMMIT_EVERY_S = 1.0  # what was indexed is on disk at least this often (a cancel or a crash keeps it)
Progress = Callable[[int, int, str], None]  # (files done, files in all, the file now)


@dataclass
class IndexReport:
    """What one update did. `unreadable`: every file of the folder the index could not read,
    with why (not only the ones read this time)."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    files: int = 0  # files read into the index, after the update
    passages: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    cancelled: bool = False
    left_out: int = 0  # document files past MAX_FILES, not indexed
    embedded: int = 0  # passages given a vector by this update (vectors.py)
    vectors: int = 0  # passages with a vector, after the update (0: ranked by their words alone)
    vectors_left_out: int = 0  # passages past vectors.MAX_VECTORS, ranked by their words alone

    def to_dict(self) -> dict:
        return {"added": self.added, "changed": self.changed, "removed": self.removed,
                "unchanged": self.unchanged, "files": self.files, "passages": self.passages,
                "unreadable": [{"file": f, "reason": r} for f, r in self.unreadable],
                "cancelled": self.cancelled, "left_out": self.left_out, "embedded": self.embedded,
                "vectors": self.vectors, "vectors_left_out": self.vectors_left_out}


def is_document(name: str) -> bool:
    """A file the library reads: a kind engine/documents/ knows, by its name (not a hidden file)."""
    return not name.startswith(".") and "." in name and name.rsplit(".", 1)[1].lower() in EXTENSIONS


def walk(folder: Path, excluded: frozenset[str] = frozenset()) -> Iterator[Path]:
    """Document files under `folder`, hidden folders and the `excluded` ones (absolute paths)
    skipped, links not followed, in a stable order."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and os.path.join(root, d) not in excluded)
        for name in sorted(files):
            if is_document(name):
                yield Path(root) / name


def digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def inside(path: Path, folders: frozenset[str]) -> bool:
    """`path` is one of `folders` (absolute paths) or lies under one."""
    s = os.path.abspath(path)
    return any(s == f or s.startswith(f + os.sep) for f in folders)


def private_folders(folder: Path, index: Path) -> frozenset[str]:
    """Tandem's own folders that lie under `folder` (its data folder, the index's folder): a
    library of one's home folder must not read them."""
    from ..paths import data_dir

    out = set()
    for own in (data_dir(), index.parent):
        try:
            own = own.expanduser().resolve()
        except OSError:
            continue
        if folder in own.parents:
            out.add(str(own))
    return frozenset(out)


class Indexer:
    """Updates one folder's `IndexStore`."""

    def __init__(self, folder: Path, store: IndexStore, excluded: frozenset[str] = frozenset()):
        """`excluded`: folders under `folder` never read (Tandem's own data folder, where the
        index, the metrics log and the chats are written: read, they would be re-read after
        every question, and answers would cite Tandem's own files)."""
        self.folder = Path(folder).resolve()
        self.store = store
        self.excluded = excluded

    def update(self, progress: Progress | None = None, cancelled: Callable[[], bool] = lambda: False,
               only: Iterable[Path] | None = None) -> IndexReport:
        """Index what changed. `only`: the paths a watcher saw change (files or folders; a path
        that is gone is dropped with everything under it); None: the whole folder."""
        if not self.folder.is_dir():
            raise DocumentError(f"{self.folder}: not a folder")
        report = IndexReport()
        known = self.store.records()
        if only is None:
            every = list(walk(self.folder, self.excluded))
            found, report.left_out = every[:MAX_FILES], max(0, len(every) - MAX_FILES)
            gone = set(known) - {self._key(p) for p in every}
        else:
            found, gone = self._changed(only, known, report)
        last_commit = time.monotonic()
        for n, path in enumerate(found):
            if cancelled():
                report.cancelled = True
                break
            key = self._key(path)
            if progress:
                progress(n, len(found), key)
            self._one(path, key, known.get(key), report)
            if time.monotonic() - last_commit > COMMIT_EVERY_S:
                self.store.commit()
                last_commit = time.monotonic()
        if not report.cancelled:  # a cut walk did not see every file: none is taken for deleted
            for key in sorted(gone):
                self.store.drop(key)
                report.removed += 1
            if progress:
                progress(len(found), len(found), "")
        self.store.commit()
        report.files, report.passages = self.store.counts()
        report.unreadable = self.store.unreadable()
        return report

    def _changed(self, only: Iterable[Path], known: dict[str, FileRecord],
                 report: IndexReport) -> tuple[list[Path], set[str]]:
        found: list[Path] = []
        gone: set[str] = set()
        for p in sorted({Path(x) for x in only}):
            try:
                key = self._key(p)
            except ValueError:  # outside the folder (a move out of it names its old path here)
                continue
            if any(part.startswith(".") for part in key.split("/")) or inside(p, self.excluded):
                continue  # hidden or excluded, as the walk skips it
            if p.is_dir():
                found += walk(p, self.excluded)
            elif p.is_file() and is_document(p.name):
                found.append(p)
            elif not p.exists():
                gone |= {k for k in known if k == key or k.startswith(key + "/")}
        unique = list(dict.fromkeys(found))
        report.left_out = max(0, len(unique) - MAX_FILES)
        return unique[:MAX_FILES], gone

    def _key(self, path: Path) -> str:
        return Path(os.path.abspath(path)).relative_to(self.folder).as_posix()

    def _one(self, path: Path, key: str, old: FileRecord | None, report: IndexReport) -> None:
        try:
            st = path.stat()
        except OSError:
            try:
                st = path.lstat()  # a link that loops or leads nowhere: said, not read
            except OSError:  # gone since the walk: the next update drops it
                return
            self._refuse(key, st, old, report, "a symbolic link that loops or leads to no file")
            return
        if not stat.S_ISREG(st.st_mode):  # a pipe would block the read: said, never opened
            self._refuse(key, st, old, report, "not a regular file")
            return
        if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
            report.unchanged += 1
            return
        sum_ = ""
        if st.st_size <= MAX_DOCUMENT_BYTES:  # a larger file is refused unread: no need to hash it
            try:
                sum_ = digest(path)
            except OSError:  # read_document below says why, in its one line
                pass
        if old is not None and sum_ and old.digest == sum_:
            self.store.touch(key, st.st_size, st.st_mtime_ns)
            report.unchanged += 1
            return
        try:
            doc = read_document(path, key)
            record = FileRecord(key, st.st_size, st.st_mtime_ns, sum_, doc.kind, "")
            found = passages(doc)
        except DocumentError as e:
            reason = str(e)
            reason = reason[len(key) + 2:] if reason.startswith(key + ": ") else reason
            record, found = FileRecord(key, st.st_size, st.st_mtime_ns, sum_, "", reason), []
        self._keep(record, found, old, report)

    def _refuse(self, key: str, st: os.stat_result, old: FileRecord | None, report: IndexReport, why: str) -> None:
        """A file that is not read at all, kept with why (and not said again until it changes)."""
        if old is not None and old.error == why and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
            report.unchanged += 1
            return
        self._keep(FileRecord(key, st.st_size, st.st_mtime_ns, "", "", why), [], old, report)

    def _keep(self, record: FileRecord, found: list, old: FileRecord | None, report: IndexReport) -> None:
        self.store.put(record, found)
        if old is None:
            report.added += 1
        else:
            report.changed += 1

