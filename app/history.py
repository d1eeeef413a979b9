"""Conversations in SQLite (WAL): list, rename, delete, search, export to Markdown.

Plain `sqlite3`, no Qt: the chat view's model wraps it. Each assistant message keeps its
generation stats and token provenance spans so the colours can be shown again later.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


class History:
    """Thread-safe (one connection guarded by a lock); the GUI writes from its main thread."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)
        self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- conversations -------------------------------------------------------------------
    def create(self, title: str = "New chat", system_prompt: str = "") -> Conversation:
        now = time.time()
        with self._lock, self._db:
            cur = self._db.execute(
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
            rows = self._db.execute(q, args).fetchall()
        return [Conversation(r["id"], r["title"], r["system_prompt"], r["created"], r["updated"]) for r in rows]

    def get(self, conversation_id: int) -> Conversation | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        return Conversation(r["id"], r["title"], r["system_prompt"], r["created"], r["updated"]) if r else None

    def rename(self, conversation_id: int, title: str) -> None:
        with self._lock, self._db:
            self._db.execute("UPDATE conversations SET title=?, updated=? WHERE id=?", (title.strip() or "Untitled", time.time(), conversation_id))

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        with self._lock, self._db:
            self._db.execute("UPDATE conversations SET system_prompt=? WHERE id=?", (system_prompt, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

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
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO messages(conversation_id, role, content, stats, spans, status, created) VALUES (?,?,?,?,?,?,?)",
                (conversation_id, role, content, json.dumps(stats) if stats else None, json.dumps(spans or []), status, now),
            )
            self._db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
        return Message(int(cur.lastrowid), conversation_id, role, content, stats, list(spans or []), status)

    def update_message(self, message_id: int, content: str, *, stats: dict | None = None,
                       spans: list[tuple[int, str]] | None = None, status: str | None = None) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE messages SET content=?, stats=COALESCE(?, stats), spans=COALESCE(?, spans), status=COALESCE(?, status) WHERE id=?",
                (content, json.dumps(stats) if stats else None, json.dumps(spans) if spans is not None else None, status, message_id),
            )

    def messages(self, conversation_id: int) -> list[Message]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conversation_id,)).fetchall()
        return [
            Message(
                r["id"], r["conversation_id"], r["role"], r["content"],
                json.loads(r["stats"]) if r["stats"] else None,
                [tuple(x) for x in json.loads(r["spans"] or "[]")],  # type: ignore[misc]
                r["status"],
            )
            for r in rows
        ]

    def delete_message(self, message_id: int) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM messages WHERE id=?", (message_id,))

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


def message_markdown(m: Message) -> str:
    who = {"user": "You", "assistant": "Assistant", "system": "System"}.get(m.role, m.role)
    lines = [f"## {who}", "", m.content]
    if m.status != "complete":
        lines += ["", f"*({m.status})*"]
    if m.role == "assistant" and m.stats:
        s = m.stats
        lines += [
            "",
            f"<sub>{s.get('generated_tokens', 0)} tokens · {s.get('decode_tokens_per_s', 0):.1f} tok/s · "
            f"first token {s.get('time_to_first_token_s', 0):.2f} s · acceptance {s.get('acceptance_rate', 0):.0%} · "
            f"{s.get('mean_tokens_per_step', 0):.2f} tokens/step</sub>",
        ]
    return "\n".join(lines)
