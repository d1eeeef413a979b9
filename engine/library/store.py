"""One folder's index on disk: a SQLite file under Tandem's data folder holding each file's
size, modification time and content digest (what the next update compares), its passages, and
an FTS5 table that ranks them by BM25, and their vectors when an embedding model made any
(vectors.py). An index of another schema version is rebuilt."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import TandemError
from .chunks import Passage

log = logging.getLogger(__name__)
SCHEMA = 2  # 2: passage vectors (vectors.py), dropped with their file
_TABLES = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, digest TEXT,
                                 kind TEXT, error TEXT);
CREATE TABLE IF NOT EXISTS passages(id INTEGER PRIMARY KEY, path TEXT, ord INTEGER, unit TEXT, anchor TEXT,
                                    text TEXT);
CREATE INDEX IF NOT EXISTS passages_by_path ON passages(path);
CREATE TABLE IF NOT EXISTS vectors(id INTEGER PRIMARY KEY, vec BLOB);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(text, name, tokenize='porter unicode61 remove_diacritics 2');
"""


@dataclass(frozen=True)
class FileRecord:
    """What the index knows of one file (its path relative to the folder, '/'-separated)."""

    path: str
    size: int
    mtime_ns: int
    digest: str
    kind: str
    error: str  # "" when it was read; else the one line saying why not


def unreadable(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """(path, why) of every file the index could not read, by path."""
    return list(db.execute("SELECT path, error FROM files WHERE error != '' ORDER BY path"))


def counts(db: sqlite3.Connection) -> tuple[int, int]:
    """(files read, passages)."""
    files = db.execute("SELECT count(*) FROM files WHERE error = ''").fetchone()[0]
    return files, db.execute("SELECT count(*) FROM passages").fetchone()[0]


def index_path(folder: Path) -> Path:
    """The index file of `folder`: named by the folder's name and a digest of its full path,
    so two folders of one name never share an index."""
    resolved = str(Path(folder).resolve())
    tag = hashlib.sha1(resolved.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return paths.library_dir() / f"{paths.safe_name(Path(resolved).name or 'root')}-{tag}.sqlite3"


class IndexStore:
    """The SQLite file of one folder's index. One writer at a time (the updating thread);
    searching from another thread opens its own connection."""

    def __init__(self, path: Path, folder: Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._open(folder)
            except sqlite3.OperationalError:  # locked by another process, not writable: said below, kept
                raise
            except sqlite3.DatabaseError as e:  # not a database, or damaged: an index is rebuilt from the folder
                log.warning("the library index %s could not be read (%s): rebuilding it", self.path, e)
                self.db.close()
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                self._open(folder)
        except (sqlite3.Error, OSError) as e:
            raise TandemError(f"the library index {self.path} cannot be opened ({e})") from None

    def _open(self, folder: Path) -> None:
        self.db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._open_schema(str(Path(folder).resolve()))

    def _open_schema(self, folder: str) -> None:
        db = self.db
        version = None
        if db.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone():
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            version = row[0] if row else None
        if version is not None and version != str(SCHEMA):
            for table in ("meta", "files", "passages", "passages_fts", "vectors"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
        db.executescript(_TABLES)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?), ('folder', ?)", (str(SCHEMA), folder))
        db.commit()

    # -- files -------------------------------------------------------------------------------
    def records(self) -> dict[str, FileRecord]:
        return {r[0]: FileRecord(*r) for r in self.db.execute(
            "SELECT path, size, mtime_ns, digest, kind, error FROM files")}

    def put(self, record: FileRecord, passages: list[Passage]) -> None:
        """`record` with its passages, replacing what the index held for its path."""
        self.drop(record.path)
        self.db.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)", (
            record.path, record.size, record.mtime_ns, record.digest, record.kind, record.error))
        name = record.path.replace("/", " ").replace("_", " ").replace("-", " ")
        for i, p in enumerate(passages):
            cur = self.db.execute("INSERT INTO passages(path, ord, unit, anchor, text) VALUES (?, ?, ?, ?, ?)",
                                  (record.path, i, p.unit, p.anchor, p.text))
            self.db.execute("INSERT INTO passages_fts(rowid, text, name) VALUES (?, ?, ?)",
                            (cur.lastrowid, f"{p.anchor}\n{p.text}", name))

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        """The file was rewritten with the same content: only its size and time change."""
        self.db.execute("UPDATE files SET size=?, mtime_ns=? WHERE path=?", (size, mtime_ns, path))

    def drop(self, path: str) -> None:
        self.db.execute("DELETE FROM passages_fts WHERE rowid IN (SELECT id FROM passages WHERE path=?)", (path,))
        self.db.execute("DELETE FROM vectors WHERE id IN (SELECT id FROM passages WHERE path=?)", (path,))
        self.db.execute("DELETE FROM passages WHERE path=?", (path,))
        self.db.execute("DELETE FROM files WHERE path=?", (path,))

    def commit(self) -> None:
        self.db.commit()

    def unreadable(self) -> list[tuple[str, str]]:
        return unreadable(self.db)

    def counts(self) -> tuple[int, int]:
        return counts(self.db)

    def close(self) -> None:
        self.db.close()
