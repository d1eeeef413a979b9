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
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

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
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
"""
# The columns this version reads, by name; more columns (a later version's) are fine.
COLUMNS = {
    "conversations": {"id", "title", "system_prompt", "created", "updated"},
    "messages": {"id", "conversation_id", "role", "content", "stats", "spans", "status", "created"},
}


@dataclass
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    stats: dict[str, Any] | None = None
    spans: list[tuple[int, str]] = field(default_factory=list)  # (characters, provenance)
    status: str = "complete"  # complete | stopped | cancelled | failed


@dataclass
class Conversation:
    id: int
    title: str
    system_prompt: str
    created: float
    updated: float


class HistoryError(Exception):
    """The database failed while reading or writing (damaged after it was opened, I/O)."""


class _Damaged(sqlite3.DatabaseError):
    """PRAGMA quick_check found problems."""


class _UnknownSchema(sqlite3.DatabaseError):
    """The tables lack columns this version reads (renamed or dropped by another version)."""


def _check_schema(db: sqlite3.Connection) -> None:
    for table, wanted in COLUMNS.items():
        have = {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}
        missing = sorted(wanted - have)
        if missing:
            raise _UnknownSchema(f"the table {table} has no column {', '.join(missing)}")


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


SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26


def _is_damage(e: sqlite3.Error) -> bool:
    if isinstance(e, _Damaged):
        return True
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return True
    text = str(e).lower()
    return "malformed" in text or "not a database" in text


SQLITE_MAGIC = b"SQLite format 3\x00"


def _looks_like_sqlite(path: Path) -> bool:
    """Missing, empty, or starting with SQLite's header: worth opening."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return True
    return head in (b"", SQLITE_MAGIC)


def _connect(path: str) -> sqlite3.Connection:
    """Open, check and set up a database; raises sqlite3.DatabaseError when it is unusable."""
    db = sqlite3.connect(path, check_same_thread=False, timeout=10)
    try:
        db.row_factory = sqlite3.Row
        problems = [str(r[0]) for r in db.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise _Damaged("; ".join(problems[:3]))
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.executescript(SCHEMA)
        db.commit()
        _check_schema(db)
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
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not _looks_like_sqlite(self.path):  # before SQLite opens it (and maybe drops its WAL)
                raise _Damaged("not an SQLite database")
            return _connect(str(self.path))
        except _UnknownSchema as e:
            return self._set_aside_unknown(str(e))
        except sqlite3.DatabaseError as e:
            if not _is_damage(e):
                return self._in_memory(str(e))
            reason = str(e)
        except OSError as e:
            return self._in_memory(e.strerror or str(e))
        try:
            self.backup = _move_aside(self.path)
            db = _connect(str(self.path))
        except (OSError, sqlite3.Error) as e:
            return self._in_memory(f"it is damaged ({reason}) and could not be moved aside: {e}")
        saved, total = _salvage(self.backup, db)
        self.notice = (
            f"The chat history database was damaged ({reason[:120]}). It was moved to {self.backup} "
            f"and a new one started; {saved} of {total} conversations could be read and were copied into it."
        )
        return db

    def _set_aside_unknown(self, reason: str) -> sqlite3.Connection:
        """A database in a layout this version does not know (another version wrote it) is
        moved aside whole, like a damaged one, not read wrongly and not changed."""
        try:
            self.backup = _move_aside(self.path, "other-version")
            db = _connect(str(self.path))
        except (OSError, sqlite3.Error) as e:
            return self._in_memory(f"its layout is not this version's ({reason}) and it could not be moved aside: {e}")
        self.notice = (f"The chat history database has a layout this version of Tandem does not know ({reason[:120]}); "
                       f"it was moved, unchanged, to {self.backup} and a new one started.")
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
        q = "SELECT * FROM conversations"
        args: tuple = ()
        if search.strip():
            like = f"%{search.strip()}%"
            q += " WHERE title LIKE ? OR id IN (SELECT conversation_id FROM messages WHERE content LIKE ?)"
            args = (like, like)
        q += " ORDER BY updated DESC, id DESC"
        with self._lock:
            rows = self._read(q, args, "the conversation list")
        return [Conversation(r["id"], r["title"], r["system_prompt"], r["created"], r["updated"]) for r in rows]

    def get(self, conversation_id: int) -> Conversation | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        return Conversation(r["id"], r["title"], r["system_prompt"], r["created"], r["updated"]) if r else None

    def rename(self, conversation_id: int, title: str) -> None:
        with self._write("the conversation's new title") as db:
            db.execute("UPDATE conversations SET title=?, updated=? WHERE id=?", (title.strip() or "Untitled", time.time(), conversation_id))

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        with self._write("the system prompt") as db:
            db.execute("UPDATE conversations SET system_prompt=? WHERE id=?", (system_prompt, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._write("the deletion of the conversation") as db:
            db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

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

    def messages(self, conversation_id: int) -> list[Message]:
        with self._lock:
            rows = self._read("SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conversation_id,), "this conversation")
        return [_message(r) for r in rows]

    def _read(self, query: str, args: tuple, what: str) -> list[sqlite3.Row]:
        try:
            return self._db.execute(query, args).fetchall()
        except sqlite3.Error as e:
            raise HistoryError(f"cannot read {what} from {self.path}: {e}") from e

    def delete_message(self, message_id: int) -> None:
        with self._write("the deletion of the message") as db:
            db.execute("DELETE FROM messages WHERE id=?", (message_id,))

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


def _message(r: sqlite3.Row) -> Message:
    """A row as a Message; stats or spans that do not parse are dropped, the text is kept."""
    try:
        stats = json.loads(r["stats"]) if r["stats"] else None
        spans = [(int(n), str(p)) for n, p in json.loads(r["spans"] or "[]")]
    except (ValueError, TypeError):
        stats, spans = None, []
    return Message(r["id"], r["conversation_id"], r["role"], r["content"], stats if isinstance(stats, dict) else None,
                   spans, r["status"])


def _move_aside(path: Path, why: str = "corrupt") -> Path:
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


def _salvage(backup: Path, db: sqlite3.Connection) -> tuple[int, int]:
    """Copy every conversation that reads cleanly from `backup` into `db`; (copied, seen).

    The backup is opened read-only so nothing in it changes."""
    try:
        src = sqlite3.connect(f"{backup.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0, 0
    saved = 0
    with closing(src):
        src.row_factory = sqlite3.Row
        try:
            convs = _rows(src.execute("SELECT id, title, system_prompt, created, updated FROM conversations ORDER BY id"))
        except sqlite3.Error:
            return 0, 0
        for c in convs:
            try:
                msgs = src.execute("SELECT role, content, stats, spans, status, created FROM messages "
                                   "WHERE conversation_id=? ORDER BY id", (c["id"],)).fetchall()
                with db:
                    cur = db.execute("INSERT INTO conversations(title, system_prompt, created, updated) VALUES (?,?,?,?)",
                                     (c["title"], c["system_prompt"], c["created"], c["updated"]))
                    db.executemany("INSERT INTO messages(conversation_id, role, content, stats, spans, status, created) "
                                   "VALUES (?,?,?,?,?,?,?)", [(cur.lastrowid, *tuple(m)) for m in msgs])
                saved += 1
            except sqlite3.Error:
                continue
    return saved, len(convs)


def stop_reason(m: Message) -> str | None:
    """Why an answer ended early, in the words its badge and its export use (None: it ended
    by itself). Stopping wins over the token limit: the user's act is what they remember."""
    if m.role != "assistant":
        return None
    if m.status in ("stopped", "cancelled"):
        return "stopped: the app was closed" if (m.stats or {}).get("stopped_by") == "close" else "stopped by you"
    if m.status == "failed":
        return "failed"
    if m.status == "generating":
        return "interrupted"
    if (m.stats or {}).get("finish_reason") == "length":
        return "stopped: max tokens"
    return None


def close_open_fence(text: str) -> str:
    """`text` with a code fence left open (an answer cut mid-block) closed, so that what
    follows it in an export is not swallowed into the code block (CommonMark fences:
    ``` or ~~~, three or more, indented at most three spaces; the closer must be at least
    as long as the opener and of the same character)."""
    opener: str | None = None
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) > 3:
            continue
        run = len(stripped) - len(stripped.lstrip(stripped[:1])) if stripped[:1] in ("`", "~") else 0
        if run < 3:
            continue
        fence = stripped[:run]
        if opener is None:
            if fence[0] == "`" and "`" in stripped[run:]:
                continue  # not a fence: a backtick fence's info string has no backtick
            opener = fence
        elif fence[0] == opener[0] and run >= len(opener) and not stripped[run:].strip():
            opener = None
    if opener is None:
        return text
    return text + ("" if text.endswith("\n") else "\n") + opener


def message_markdown(m: Message) -> str:
    who = {"user": "You", "assistant": "Assistant", "system": "System"}.get(m.role, m.role)
    lines = [f"## {who}", "", close_open_fence(m.content)]
    reason = stop_reason(m) or (m.status if m.status != "complete" else None)
    if reason:
        lines += ["", f"*({reason})*"]
    if m.role == "assistant" and m.stats:
        s = m.stats
        parts = [f"{s.get('generated_tokens', 0)} tokens", f"{s.get('decode_tokens_per_s', 0):.1f} tok/s",
                 f"first token {s.get('time_to_first_token_s', 0):.2f} s"]
        if s.get("drafted"):  # an acceptance rate of nothing drafted is no figure
            parts += [f"acceptance {s.get('acceptance_rate', 0):.0%}", f"{s.get('mean_tokens_per_step', 0):.2f} tokens/step"]
        lines += ["", f"<sub>{' · '.join(parts)}</sub>"]
    return "\n".join(lines)
