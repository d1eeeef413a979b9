"""A damaged chat history: how damage is recognised, the file moved aside (its WAL too,
nothing deleted), and every conversation that still reads copied into a fresh database,
with its answer and question versions and its own settings. `app.history.History` decides when; this module does the work."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

from .pictures import copy_images


class Damaged(sqlite3.DatabaseError):
    """PRAGMA quick_check found problems."""


SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26


def is_damage(e: sqlite3.Error) -> bool:
    if isinstance(e, Damaged):
        return True
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return True
    text = str(e).lower()
    return "malformed" in text or "not a database" in text


SQLITE_MAGIC = b"SQLite format 3\x00"


def looks_like_sqlite(path: Path) -> bool:
    """Missing, empty, or starting with SQLite's header: worth opening."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return True
    return head in (b"", SQLITE_MAGIC)


def move_aside(path: Path, why: str = "corrupt") -> Path:
    """Rename a damaged database (and its -wal/-shm, which may hold the latest writes) to
    `NAME.corrupt-YYYYmmdd-HHMMSS.db` (or `.other-version-...`); returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.stem}.{why}-{stamp}{path.suffix}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.stem}.{why}-{stamp}-{n}{path.suffix}")
    path.rename(backup)
    for ext in ("-wal", "-shm"):
        side = Path(str(path) + ext)
        if side.exists():
            side.rename(Path(str(backup) + ext))
    return backup


def _rows(cursor: sqlite3.Cursor) -> list[sqlite3.Row]:
    """The rows a damaged table still yields, up to the first unreadable page."""
    out: list[sqlite3.Row] = []
    try:
        for r in cursor:
            out.append(r)
    except sqlite3.Error:
        pass
    return out


def salvage(backup: Path, db: sqlite3.Connection) -> tuple[int, int]:
    """Copy every conversation that reads cleanly from `backup` into `db`; (copied, seen).

    The backup is opened read-only so nothing in it changes."""
    try:
        src = sqlite3.connect(f"{backup.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0, 0
    with closing(src):
        return copy_conversations(src, db)


def copy_conversations(src: sqlite3.Connection, db: sqlite3.Connection) -> tuple[int, int]:
    """Copy every conversation that reads cleanly from `src` (any layout since the first:
    without answer versions, question versions, chat settings, pins or folders too) into `db`,
    under new ids, with the versions, settings, pin and folder that go with them; (copied, seen)."""
    saved = 0
    src.row_factory = sqlite3.Row
    try:
        chat_columns = {str(r[1]) for r in _rows(src.execute("PRAGMA table_info(conversations)"))}
        filed = ", pinned, folder" if {"pinned", "folder"} <= chat_columns else ", 0, ''"
        convs = _rows(src.execute(f"SELECT id, title, system_prompt, created, updated{filed} FROM conversations ORDER BY id"))
    except sqlite3.Error:
        return 0, 0
    has_versions = {str(r[1]) for r in _rows(src.execute("PRAGMA table_info(messages)"))} >= {"version"}
    tables = {str(r[0]) for r in _rows(src.execute("SELECT name FROM sqlite_master WHERE type='table'"))}
    for c in convs:
        try:
            msgs = src.execute(f"SELECT id, role, content, stats, spans, status, created, "
                               f"{'version' if has_versions else '1'} FROM messages "
                               "WHERE conversation_id=? ORDER BY id", (c["id"],)).fetchall()
            with db:
                cur = db.execute("INSERT INTO conversations(title, system_prompt, created, updated, pinned, folder) "
                                 "VALUES (?,?,?,?,?,?)", tuple(c)[1:])
                for m in msgs:
                    new = db.execute("INSERT INTO messages(conversation_id, role, content, stats, spans, status, created, "
                                     "version) VALUES (?,?,?,?,?,?,?,?)", (cur.lastrowid, *tuple(m)[1:])).lastrowid
                    if has_versions:
                        db.executemany("INSERT INTO answer_versions(message_id, n, content, stats, spans, status, created) "
                                       "VALUES (?,?,?,?,?,?,?)", [(new, *tuple(v)) for v in _versions(src, m[0])])
                    if "question_versions" in tables:
                        db.executemany("INSERT INTO question_versions(message_id, n, content, spans, tail, created) "
                                       "VALUES (?,?,?,?,?,?)", [(new, *tuple(v)) for v in _question_versions(src, m[0])])
                settings = _settings(src, c["id"]) if "chat_settings" in tables else None
                if settings is not None:
                    db.execute("INSERT INTO chat_settings(conversation_id, settings) VALUES (?,?)", (cur.lastrowid, settings))
            saved += 1
        except sqlite3.Error:
            continue
    copy_images(src, db)  # the pictures the copied questions name (pictures.py)
    return saved, len(convs)


def _versions(src: sqlite3.Connection, message_id: int) -> list[sqlite3.Row]:
    """The earlier answers of a salvaged message that still read ([] when that table is gone)."""
    try:
        return _rows(src.execute("SELECT n, content, stats, spans, status, created FROM answer_versions "
                                 "WHERE message_id=? ORDER BY n", (message_id,)))
    except sqlite3.Error:
        return []


def _question_versions(src: sqlite3.Connection, message_id: int) -> list[sqlite3.Row]:
    """The other versions of an edited question, each with the conversation that followed it."""
    try:
        return _rows(src.execute("SELECT n, content, spans, tail, created FROM question_versions "
                                 "WHERE message_id=? ORDER BY n", (message_id,)))
    except sqlite3.Error:
        return []


def _settings(src: sqlite3.Connection, conversation_id: int) -> str | None:
    """The chat's own settings as stored (JSON), or None when it has none or they do not read."""
    try:
        row = src.execute("SELECT settings FROM chat_settings WHERE conversation_id=?", (conversation_id,)).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None
