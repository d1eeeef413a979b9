"""A chat history this process may not write (a read-only file, folder or WAL side file).

Opening such a database the usual way would migrate it (an ALTER that fails) and would let
SQLite create `-wal`/`-shm` files with the database's read-only mode, which then keep the
database unwritable after the user fixes its permission. So: the reason is found before
opening; the conversations are read through a connection that creates no file (or removes
the side files it had to create) and are copied into the session's in-memory history, so
they are shown and new chats work, unsaved. When the permission is fixed, the next start
opens and migrates it normally (side files an earlier version left read-only are made
writable again when they are ours).
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

from .repair import copy_conversations

SIDE_FILES = ("-wal", "-shm")
SQLITE_READONLY = 8


def side_files(path: Path) -> list[Path]:
    return [Path(str(path) + ext) for ext in SIDE_FILES]


def is_read_only_error(e: sqlite3.Error) -> bool:
    """SQLite refused a write because a file is read-only (any SQLITE_READONLY_* code)."""
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == SQLITE_READONLY:
        return True
    text = str(e).lower()
    return "readonly" in text or "read-only" in text


def _restore_side_mode(side: Path, db_mode: int) -> bool:
    """Make a read-only side file of ours writable like its database; True when it is now."""
    try:
        geteuid = getattr(os, "geteuid", None)  # Windows has no owner ids to compare
        if geteuid is not None and side.stat().st_uid != geteuid():
            return False
        side.chmod(db_mode & 0o666)
    except OSError:
        return False
    return os.access(side, os.W_OK)


def read_only_reason(path: Path) -> str | None:
    """Why the existing database at `path` cannot be written, in the user's words; None when
    it can (or does not exist yet: creating it is the usual open's business)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    sides = side_files(path)
    for side in sides:
        if side.exists() and not os.access(side, os.W_OK) and not _restore_side_mode(side, st.st_mode):
            return f"{side.name} beside it is read-only"
    if not os.access(path.parent, os.W_OK) and not all(s.exists() for s in sides):
        return "its folder is read-only"
    return None


def _source(path: Path) -> sqlite3.Connection:
    """A connection that reads `path` and creates no file: `immutable` (no locks, no side
    files) unless a non-empty WAL holds the latest writes, which only a `mode=ro`
    connection reads (that one may need to create the -shm)."""
    uri = path.resolve().as_uri()
    wal = Path(str(path) + "-wal")
    fresh_wal = wal.exists() and wal.stat().st_size > 0
    return sqlite3.connect(f"{uri}?{'mode=ro' if fresh_wal else 'immutable=1'}", uri=True)


def remove_created(before: set[Path], path: Path) -> None:
    """Remove the side files of `path` that did not exist in `before` (SQLite made them for a
    connection that could not write; left behind read-only they would block later writes)."""
    for side in side_files(path):
        if side not in before and side.exists():
            try:
                side.unlink()
            except OSError:
                pass


def existing_side_files(path: Path) -> set[Path]:
    return {s for s in side_files(path) if s.exists()}


def copy_read_only(path: Path, db: sqlite3.Connection) -> tuple[int, int]:
    """Copy the conversations of the read-only database `path` into `db`; (copied, seen)."""
    before = existing_side_files(path)
    try:
        src = _source(path)
    except (OSError, sqlite3.Error):
        return 0, 0
    try:
        with closing(src):
            return copy_conversations(src, db)
    finally:
        remove_created(before, path)
