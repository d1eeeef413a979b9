"""Conversations in SQLite (WAL): list, rename, delete, search, export to Markdown.

Plain `sqlite3`, no Qt: the chat view's model wraps it. Each assistant message keeps its
generation stats and token provenance spans so the colours can be shown again later.

A damaged database never stops the app: on open `PRAGMA quick_check` runs; a file that
fails it is moved aside with a timestamp (its WAL too, nothing is deleted), a fresh one is
started, every conversation that can still be read is copied into it, and `notice` says
where the old file is. A database that cannot be opened at all (permissions, a full disk)
gives an in-memory history for the session, also with a notice. A database whose tables
lack a column this version reads (another version changed the layout) is moved aside whole
in the same way, with its own notice. Every write that fails (disk full, read-only) raises
`HistoryError` naming what was not saved, and tells `on_write_error` (the window) first.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .branches import SCHEMA as BRANCHES_SCHEMA
from .pictures import SCHEMA as PICTURES_SCHEMA, prune
from .settings import SCHEMA as SETTINGS_SCHEMA
from .markdown import answer_sources, close_open_fence, message_markdown, references_markdown, source_place, stop_reason
from .readonly import copy_read_only, existing_side_files, is_read_only_error, read_only_reason, remove_created
from .repair import Damaged, is_damage, looks_like_sqlite, move_aside, salvage
from .search import Found, add_search_index, find

__all__ = ["COLUMNS", "Conversation", "Found", "History", "HistoryError", "Message", "answer_sources",
           "close_open_fence", "message_markdown", "references_markdown", "source_place", "stop_reason"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    spans TEXT,
    status TEXT NOT NULL DEFAULT 'complete',
    created REAL NOT NULL,
    version INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE IF NOT EXISTS answer_versions (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    spans TEXT,
    status TEXT NOT NULL DEFAULT 'complete',
    created REAL NOT NULL,
    PRIMARY KEY (message_id, n)
);
"""
# The columns this version reads, by name; more columns (a later version's) are fine.
# messages.version is not among them: a database from before answer versions gains it (`_migrate`).
COLUMNS = {
    "conversations": {"id", "title", "system_prompt", "created", "updated"},
    "messages": {"id", "conversation_id", "role", "content", "stats", "spans", "status", "created"},
    "answer_versions": {"message_id", "n", "content", "stats", "spans", "status", "created"},
}
# PRAGMA user_version: 2 = answers keep their versions (answer_versions, messages.version); 3 = chats can be
# pinned and put in a folder (conversations.pinned, .folder) and are searched through an index (search.py);
# 4 = questions carry pictures (pictures.py: the `images` table, created on open like the others)
SCHEMA_VERSION = 4


@dataclass
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    stats: dict[str, Any] | None = None
    spans: list[tuple[int, str]] = field(default_factory=list)  # (characters, provenance); a question's: its parts
    status: str = "complete"  # complete | stopped | cancelled | failed
    version: int = 1  # which of the answer's versions this is (Regenerate adds one)
    versions: int = 1  # how many the answer has

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tools the answer called, in order (kept in its stats: versions, forks, repair and
        archives carry them with it); app/tool_worker.py's call_record shape."""
        calls = (self.stats or {}).get("tool_calls")
        return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


@dataclass
class Conversation:
    id: int
    title: str
    system_prompt: str
    created: float
    updated: float
    pinned: bool = False  # listed above the others
    folder: str = ""  # the folder it is filed in ("": none)


def _conversation(r: sqlite3.Row) -> Conversation:
    return Conversation(r["id"], r["title"], r["system_prompt"], r["created"], r["updated"], bool(r["pinned"]),
                        str(r["folder"] or ""))


class HistoryError(Exception):
    """The database failed while reading or writing (damaged after it was opened, I/O)."""


class _UnknownSchema(sqlite3.DatabaseError):
    """The tables lack columns this version reads (renamed or dropped by another version)."""


def _check_schema(db: sqlite3.Connection, *, created: bool = True) -> None:
    """Every table this version reads has its columns; `created=False`: only the tables that
    exist already (a table an earlier version did not have is created, not missing)."""
    for table, wanted in COLUMNS.items():
        have = {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}
        if not have and not created:
            continue
        missing = sorted(wanted - have)
        if missing:
            raise _UnknownSchema(f"the table {table} has no column {', '.join(missing)}")


def _migrate(db: sqlite3.Connection) -> None:
    """Bring a database from an earlier version up to this one, in one transaction: a
    database from before answer versions gains `messages.version` (every answer is its own
    version 1), one from before pins and folders `conversations.pinned` and `.folder` (none
    pinned, none filed); nothing is dropped or rewritten, so an older Tandem still reads it.
    The search index (search.py) is added after, and filled once."""
    have = {str(r[1]) for r in db.execute("PRAGMA table_info(messages)")}
    chats = {str(r[1]) for r in db.execute("PRAGMA table_info(conversations)")}
    with db:
        if "version" not in have:
            db.execute("ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 1")
        if "pinned" not in chats:
            db.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
        if "folder" not in chats:
            db.execute("ALTER TABLE conversations ADD COLUMN folder TEXT NOT NULL DEFAULT ''")
        if int(db.execute("PRAGMA user_version").fetchone()[0]) < SCHEMA_VERSION:
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _write_reason(e: sqlite3.Error) -> str:
    """The cause of a failed write in the user's words."""
    text = str(e).lower()
    if "full" in text:
        return "the disk is full"
    if "readonly" in text or "read-only" in text:
        return "the file or its folder is read-only"
    if "locked" in text or "busy" in text:
        return "another program holds it locked"
    return str(e)


def _connect(path: str) -> sqlite3.Connection:
    """Open, check and set up a database; raises sqlite3.DatabaseError when it is unusable."""
    db = sqlite3.connect(path, check_same_thread=False, timeout=10)
    try:
        db.row_factory = sqlite3.Row
        problems = [str(r[0]) for r in db.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise Damaged("; ".join(problems[:3]))
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
        _check_schema(db, created=False)  # before anything is changed: another version's layout stays as it is
        db.executescript(SCHEMA + BRANCHES_SCHEMA + SETTINGS_SCHEMA + PICTURES_SCHEMA)
        db.commit()
        _check_schema(db)
        _migrate(db)
        add_search_index(db)
    except BaseException:
        db.close()
        raise
    return db


class History:
    """Thread-safe (one connection guarded by a lock); the GUI writes from its main thread."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.notice: str | None = None  # for the window: what happened to a damaged database
        self.backup: Path | None = None  # where a damaged database was moved
        self.on_write_error: Callable[[str], None] | None = None  # the window's error display
        self.read_only = False  # the file could not be written: its chats were copied into memory
        self._db = self._open()
        self._indexed = self._db.execute("SELECT 1 FROM sqlite_master WHERE name='message_search'").fetchone() is not None

    def _open(self) -> sqlite3.Connection:
        before = existing_side_files(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not looks_like_sqlite(self.path):  # before SQLite opens it (and maybe drops its WAL)
                raise Damaged("not an SQLite database")
            why = read_only_reason(self.path)  # before any write: not half migrated, no side file left read-only
            if why is not None:
                return self._read_only(why)
            return _connect(str(self.path))
        except _UnknownSchema as e:
            return self._set_aside_unknown(str(e))
        except sqlite3.DatabaseError as e:
            if is_read_only_error(e):  # refused although the checks said writable (a policy, another owner)
                remove_created(before, self.path)
                return self._read_only(_write_reason(e))
            if not is_damage(e):
                return self._in_memory(str(e))
            reason = str(e)
        except OSError as e:
            return self._in_memory(e.strerror or str(e))
        try:
            self.backup = move_aside(self.path)
            db = _connect(str(self.path))
        except (OSError, sqlite3.Error) as e:
            return self._in_memory(f"it is damaged ({reason}) and could not be moved aside: {e}")
        saved, total = salvage(self.backup, db)
        self.notice = (
            f"The chat history database was damaged ({reason[:120]}). It was moved to {self.backup} "
            f"and a new one started; {saved} of {total} conversations could be read and were copied into it."
        )
        return db

    def _set_aside_unknown(self, reason: str) -> sqlite3.Connection:
        """A database in a layout this version does not know (another version wrote it) is
        moved aside whole, like a damaged one, not read wrongly and not changed."""
        try:
            self.backup = move_aside(self.path, "other-version")
            db = _connect(str(self.path))
        except (OSError, sqlite3.Error) as e:
            return self._in_memory(f"its layout is not this version's ({reason}) and it could not be moved aside: {e}")
        self.notice = (f"The chat history database has a layout this version of Tandem does not know ({reason[:120]}); "
                       f"it was moved, unchanged, to {self.backup} and a new one started.")
        return db

    def _read_only(self, reason: str) -> sqlite3.Connection:
        """Show the conversations of a database that cannot be written, saving nothing new."""
        db = _connect(":memory:")
        saved, total = copy_read_only(self.path, db)
        self.read_only = True
        shown = f"its {saved} conversations are shown" if saved == total else \
            f"{saved} of its {total} conversations could be read and are shown"
        self.notice = (f"The chat history database {self.path} is read-only ({reason}): {shown}, but nothing new "
                       "is saved (new chats last until Tandem closes). Make it writable and restart Tandem to save again.")
        return db

    def _in_memory(self, reason: str) -> sqlite3.Connection:
        self.notice = f"The chat history database {self.path} could not be opened ({reason}); chats in this session will not be saved."
        return _connect(":memory:")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One transaction; a failure (disk full, read-only, locked) becomes a `HistoryError`
        saying what was not saved and why, after `on_write_error` (the window's message) hears
        it, outside the lock: the window may show a dialog that reads the history meanwhile."""
        try:
            with self._lock, self._db:
                yield self._db
        except sqlite3.Error as e:
            error = HistoryError(f"Could not save {what} in {self.path}: {_write_reason(e)}")
            if self.on_write_error is not None:
                self.on_write_error(str(error))
            raise error from e

    # -- conversations -------------------------------------------------------------------
    def create(self, title: str = "New chat", system_prompt: str = "") -> Conversation:
        now = time.time()
        with self._write("the new conversation") as db:
            cur = db.execute(
                "INSERT INTO conversations(title, system_prompt, created, updated) VALUES (?,?,?,?)",
                (title, system_prompt, now, now),
            )
        return Conversation(int(cur.lastrowid), title, system_prompt, now, now)

    def conversations(self, search: str = "") -> list[Conversation]:
        """Every chat, pinned ones first, each group newest first; with `search`, the chats it
        finds, best first (`find`)."""
        if search.strip():
            return [c for c, _snippet in self.find(search)]
        with self._lock:
            rows = self._read("SELECT * FROM conversations ORDER BY pinned DESC, updated DESC, id DESC", (),
                              "the conversation list")
        return [_conversation(r) for r in rows]

    def find(self, text: str) -> list[tuple[Conversation, str]]:
        """The chats whose title or messages hold `text`, best first, each with a snippet of
        its best matching message ("" when its title matched)."""
        with self._lock:
            try:
                found = find(self._db, text, self._indexed)
            except sqlite3.Error as e:
                raise HistoryError(f"cannot search the conversations in {self.path}: {e}") from e
            rows = {r["id"]: r for r in self._read("SELECT * FROM conversations", (), "the conversation list")}
        return [(_conversation(rows[f.conversation_id]), f.snippet) for f in found if f.conversation_id in rows]

    def get(self, conversation_id: int) -> Conversation | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        return _conversation(r) if r else None

    def set_pinned(self, conversation_id: int, pinned: bool) -> None:
        with self._write("the pin of the conversation") as db:
            db.execute("UPDATE conversations SET pinned=? WHERE id=?", (int(pinned), conversation_id))

    def set_folder(self, conversation_id: int, folder: str) -> None:
        """File the chat in `folder` ("" or spaces: in none)."""
        with self._write("the conversation's folder") as db:
            db.execute("UPDATE conversations SET folder=? WHERE id=?", (" ".join(folder.split()), conversation_id))

    def folders(self) -> list[str]:
        """The folders chats are filed in, by name."""
        with self._lock:
            rows = self._read("SELECT DISTINCT folder FROM conversations WHERE folder != '' ORDER BY folder COLLATE NOCASE",
                              (), "the folders")
        return [str(r[0]) for r in rows]

    def rename(self, conversation_id: int, title: str) -> None:
        with self._write("the conversation's new title") as db:
            db.execute("UPDATE conversations SET title=?, updated=? WHERE id=?", (title.strip() or "Untitled", time.time(), conversation_id))

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        with self._write("the system prompt") as db:
            db.execute("UPDATE conversations SET system_prompt=? WHERE id=?", (system_prompt, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._write("the deletion of the conversation") as db:
            db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))
            prune(db)

    # -- messages ------------------------------------------------------------------------
    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        stats: dict[str, Any] | None = None,
        spans: list[tuple[int, str]] | None = None,
        status: str = "complete",
    ) -> Message:
        now = time.time()
        with self._write("your message" if role == "user" else "the answer") as db:
            cur = db.execute(
                "INSERT INTO messages(conversation_id, role, content, stats, spans, status, created) VALUES (?,?,?,?,?,?,?)",
                (conversation_id, role, content, json.dumps(stats) if stats else None, json.dumps(spans or []), status, now),
            )
            db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
        return Message(int(cur.lastrowid), conversation_id, role, content, stats, list(spans or []), status)

    def update_message(self, message_id: int, content: str, *, stats: dict | None = None,
                       spans: list[tuple[int, str]] | None = None, status: str | None = None) -> None:
        with self._write("the answer") as db:
            db.execute(
                "UPDATE messages SET content=?, stats=COALESCE(?, stats), spans=COALESCE(?, spans), status=COALESCE(?, status) WHERE id=?",
                (content, json.dumps(stats) if stats else None, json.dumps(spans) if spans is not None else None, status, message_id),
            )
            _mirror_version(db, message_id)

    def save_partial(self, message_id: int, content: str, spans: list[tuple[int, str]]) -> bool:
        """Keep what an answer being written has so far, so that a crash (kill -9, a power
        button) loses at most the last moments of it; its status stays as it is (a reopen
        shows a `generating` answer as interrupted). Cheap enough for the GUI thread every
        second or so: no fsync (WAL with synchronous=NORMAL survives the app's crash; the
        final save is a full one). A failure is only returned: the final save reports it."""
        try:
            with self._lock:
                before = int(self._db.execute("PRAGMA synchronous").fetchone()[0])
                self._db.execute("PRAGMA synchronous=NORMAL")
                try:
                    with self._db:
                        self._db.execute("UPDATE messages SET content=?, spans=? WHERE id=?",
                                         (content, json.dumps(spans), message_id))
                        _mirror_version(self._db, message_id)
                finally:
                    self._db.execute(f"PRAGMA synchronous={before}")
        except sqlite3.Error:
            return False
        return True

    # -- answer versions (Regenerate keeps the earlier answers) ----------------------------
    def new_version(self, message_id: int) -> Message:
        """Make room for another version of answer `message_id` and choose it: the earlier
        versions are kept (the first time, the answer as it is becomes version 1); the
        message row becomes an empty answer being generated. Returns it."""
        now = time.time()
        with self._write("the new version of the answer") as db:
            if not db.execute("SELECT 1 FROM answer_versions WHERE message_id=?", (message_id,)).fetchone():
                db.execute("INSERT INTO answer_versions(message_id, n, content, stats, spans, status, created) "
                           "SELECT id, version, content, stats, spans, status, created FROM messages WHERE id=?",
                           (message_id,))
            n = int(db.execute("SELECT COALESCE(MAX(n), 0) + 1 FROM answer_versions WHERE message_id=?",
                               (message_id,)).fetchone()[0])
            db.execute("UPDATE messages SET content='', stats=NULL, spans='[]', status='generating', version=?, created=? "
                       "WHERE id=?", (n, now, message_id))
            db.execute("INSERT INTO answer_versions(message_id, n, content, stats, spans, status, created) "
                       "VALUES (?, ?, '', NULL, '[]', 'generating', ?)", (message_id, n, now))
            db.execute("UPDATE conversations SET updated=? WHERE id=(SELECT conversation_id FROM messages WHERE id=?)",
                       (now, message_id))
        return self.message(message_id)

    def choose_version(self, message_id: int, n: int) -> Message:
        """Show version `n` of answer `message_id` from now on (the chat, a reopen and an
        export use it); KeyError when it has no such version."""
        with self._write("the chosen version of the answer") as db:
            cur = db.execute(
                "UPDATE messages SET (content, stats, spans, status, created, version) = "
                "(SELECT content, stats, spans, status, created, n FROM answer_versions WHERE message_id=? AND n=?) "
                "WHERE id=? AND EXISTS (SELECT 1 FROM answer_versions WHERE message_id=? AND n=?)",
                (message_id, n, message_id, message_id, n))
        if cur.rowcount != 1:
            raise KeyError(f"answer {message_id} has no version {n}")
        return self.message(message_id)

    def message(self, message_id: int) -> Message:
        with self._lock:
            rows = self._read(f"{_SELECT_MESSAGES} WHERE m.id=?", (message_id,), "the message")
        if not rows:
            raise KeyError(message_id)
        return _message(rows[0])

    def messages(self, conversation_id: int) -> list[Message]:
        with self._lock:
            rows = self._read(f"{_SELECT_MESSAGES} WHERE m.conversation_id=? ORDER BY m.id", (conversation_id,),
                              "this conversation")
        return [_message(r) for r in rows]

    def _read(self, query: str, args: tuple, what: str) -> list[sqlite3.Row]:
        try:
            return self._db.execute(query, args).fetchall()
        except sqlite3.Error as e:
            raise HistoryError(f"cannot read {what} from {self.path}: {e}") from e

    def delete_message(self, message_id: int) -> None:
        with self._write("the deletion of the message") as db:
            db.execute("DELETE FROM messages WHERE id=?", (message_id,))
            prune(db)

    def delete_messages_from(self, conversation_id: int, message_id: int) -> int:
        """Delete message `message_id` and every later one of the conversation (edit and
        resend, regenerate); returns how many went."""
        with self._write("the change to the conversation") as db:
            cur = db.execute("DELETE FROM messages WHERE conversation_id=? AND id>=?", (conversation_id, message_id))
            db.execute("UPDATE conversations SET updated=? WHERE id=?", (time.time(), conversation_id))
        return cur.rowcount

    # -- export --------------------------------------------------------------------------
    def to_markdown(self, conversation_id: int) -> str:
        conv = self.get(conversation_id)
        if conv is None:
            raise KeyError(conversation_id)
        out = [f"# {conv.title}", ""]
        if conv.system_prompt:
            out += [f"> System: {conv.system_prompt}", ""]
        for m in self.messages(conversation_id):
            out.append(message_markdown(m))
            out.append("")
        return "\n".join(out).rstrip() + "\n"


_SELECT_MESSAGES = ("SELECT m.*, (SELECT COUNT(*) FROM answer_versions v WHERE v.message_id=m.id) + (SELECT COUNT(*) "
                    "FROM question_versions q WHERE q.message_id=m.id) AS n_versions FROM messages m")


def _mirror_version(db: sqlite3.Connection, message_id: int) -> None:
    """An answer with versions keeps its chosen one's row equal to the message (written as it streams)."""
    db.execute("UPDATE answer_versions SET (content, stats, spans, status) = "
               "(SELECT content, stats, spans, status FROM messages WHERE id=?) "
               "WHERE message_id=? AND n=(SELECT version FROM messages WHERE id=?)", (message_id, message_id, message_id))


def _message(r: sqlite3.Row) -> Message:
    """A row as a Message; stats or spans that do not parse are dropped, the text is kept."""
    try:
        stats = json.loads(r["stats"]) if r["stats"] else None
        spans = [(int(n), str(p)) for n, p in json.loads(r["spans"] or "[]")]
    except (ValueError, TypeError):
        stats, spans = None, []
    version = int(r["version"] or 1)
    return Message(r["id"], r["conversation_id"], r["role"], r["content"], stats if isinstance(stats, dict) else None,
                   spans, r["status"], version, max(version, int(r["n_versions"] or 0), 1))
