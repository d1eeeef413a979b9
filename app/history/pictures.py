"""Pictures sent with a question, kept once each by their sha256.

A question names its pictures in its spans, as it names its files: one zero-length part per
picture, `image:<sha256>/<name>`, before the files and the typed text (where the prompt puts
them). So every path that already carries a question's spans (answer and question versions,
forks, repair, archives) carries its pictures' names without a change. The bytes live once
in the `images` table, keyed by digest: a screenshot sent in ten chats, or resent by every
Regenerate and Edit, is stored once, inside the one database file (a backup, a read-only copy
or a salvage takes them along; no folder of loose files to keep in step). A picture no message
names any more is dropped when a chat or a message is deleted (`prune`).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from typing import Iterable, Protocol

SCHEMA = """
CREATE TABLE IF NOT EXISTS images (
    sha256 TEXT PRIMARY KEY,
    data BLOB NOT NULL,
    created REAL NOT NULL
);
"""
IMAGE_PART = "image:"  # the label of a picture's (empty) part in a question's spans
_LABEL = re.compile(r"image:([0-9a-f]{64})/(.*)", re.DOTALL)


class _PictureDatabase(Protocol):
    """What the pictures need of the History: its database, lock and writes."""

    _db: sqlite3.Connection
    _lock: threading.Lock

    def _write(self, what: str) -> AbstractContextManager[sqlite3.Connection]: ...


def image_span(sha256: str, name: str) -> tuple[int, str]:
    """A picture's part in a question's spans (no characters: the text does not hold it)."""
    return 0, f"{IMAGE_PART}{sha256}/{' '.join(name.split()) or 'image'}"


def image_refs(spans: Iterable[tuple[int, str]] | None) -> list[tuple[str, str]]:
    """(sha256, name) of each picture a question's spans name, in order."""
    out = []
    for n, label in spans or ():
        m = _LABEL.fullmatch(label) if n == 0 and isinstance(label, str) else None
        if m is not None:
            out.append((m.group(1), m.group(2)))
    return out


def keep_images(history: _PictureDatabase, images: Iterable[tuple[str, bytes]]) -> None:
    """Store each (sha256, bytes) not stored yet; HistoryError when the write fails."""
    now = time.time()
    with history._write("the pictures") as db:
        db.executemany("INSERT OR IGNORE INTO images(sha256, data, created) VALUES (?,?,?)",
                       [(sha, sqlite3.Binary(data), now) for sha, data in images])


def image_bytes(history: _PictureDatabase, sha256: str) -> bytes | None:
    """The stored picture of that digest (None: not stored, or unreadable)."""
    try:
        with history._lock:
            row = history._db.execute("SELECT data FROM images WHERE sha256=?", (sha256,)).fetchone()
    except sqlite3.Error:
        return None
    return bytes(row[0]) if row else None


def prune(db: sqlite3.Connection) -> None:
    """Drop the pictures no message, answer or question version names any more (a deleted
    chat's screenshot does not stay behind in the file). Inside the caller's transaction."""
    db.execute("DELETE FROM images WHERE NOT EXISTS (SELECT 1 FROM messages WHERE spans LIKE '%image:' || sha256 || '%') "
               "AND NOT EXISTS (SELECT 1 FROM question_versions WHERE spans LIKE '%image:' || sha256 || '%' "
               "OR tail LIKE '%image:' || sha256 || '%')")


def copy_images(src: sqlite3.Connection, db: sqlite3.Connection) -> None:
    """The pictures of `src` that read cleanly, into `db` (repair and the read-only copy)."""
    try:
        if src.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='images'").fetchone() is None:
            return
        rows = src.execute("SELECT sha256, data, created FROM images").fetchall()
    except sqlite3.Error:
        return
    with db:
        db.executemany("INSERT OR IGNORE INTO images(sha256, data, created) VALUES (?,?,?)",
                       [tuple(r) for r in rows if isinstance(r[1], bytes)])
