"""Searching the chats: a full-text index (SQLite FTS5) over every message as shown, kept by
triggers on the messages table, so no code that writes a message has to remember it; a search
finds the chats whose title or messages hold every word typed (each word also as the start of a
longer one: "budg" finds "budget"), with a snippet of the best matching message.

The index holds the messages as shown: an answer's other versions and an edited question's
other branches are not searched until they are shown. On a Python whose SQLite lacks FTS5 the
same search runs as a plain substring scan (slower on a large history, same results for one word).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS message_search USING fts5(
    content, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS message_search_insert AFTER INSERT ON messages BEGIN
    INSERT INTO message_search(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS message_search_delete AFTER DELETE ON messages BEGIN
    INSERT INTO message_search(message_search, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER IF NOT EXISTS message_search_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO message_search(message_search, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO message_search(rowid, content) VALUES (new.id, new.content);
END;
"""
SNIPPET_WORDS = 8  # words around the match in a snippet (the list shows its first 30 characters or so)
MAX_HITS = 5000  # matching messages looked at per search (a very common word in a huge history)


@dataclass(frozen=True)
class Found:
    """A chat a search found: its id and a snippet of its best matching message ("" when only
    its title matched)."""

    conversation_id: int
    snippet: str


def add_search_index(db: sqlite3.Connection) -> bool:
    """Create the index and its triggers; a database from before the index has its messages
    indexed once. False when this SQLite has no FTS5 (search then scans)."""
    existed = db.execute("SELECT 1 FROM sqlite_master WHERE name='message_search'").fetchone() is not None
    try:
        db.executescript(SCHEMA)
    except sqlite3.OperationalError as e:
        if "fts5" in str(e).lower():
            return False
        raise
    if not existed:
        with db:
            db.execute("INSERT INTO message_search(message_search) VALUES ('rebuild')")
    return True


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def find(db: sqlite3.Connection, text: str, indexed: bool) -> list[Found]:
    """The chats matching `text`: those whose title holds it first (newest first), then those
    whose messages hold every word, best match first."""
    text = " ".join(text.split())
    if not text:
        return []
    titles = [int(r[0]) for r in db.execute(
        "SELECT id FROM conversations WHERE title LIKE ? ORDER BY updated DESC, id DESC", (f"%{text}%",))]
    query = " ".join('"' + w.replace('"', '""') + '"*' for w in words(text))
    hits = _indexed(db, query) if indexed and query else _scanned(db, text)
    out = [Found(cid, hits.pop(cid, "")) for cid in titles]
    return out + [Found(cid, snippet) for cid, snippet in hits.items()]


def _indexed(db: sqlite3.Connection, query: str) -> dict[int, str]:
    """Matching chats, best first, each with a snippet of its best message."""
    rows = db.execute(
        "SELECT m.conversation_id, snippet(message_search, 0, '', '', '…', ?) FROM message_search "
        "JOIN messages m ON m.id = message_search.rowid WHERE message_search MATCH ? "
        "ORDER BY bm25(message_search) LIMIT ?", (SNIPPET_WORDS, query, MAX_HITS)).fetchall()
    best: dict[int, str] = {}
    for cid, snippet in rows:
        best.setdefault(int(cid), " ".join(str(snippet).split()))
    return best


def _scanned(db: sqlite3.Connection, text: str) -> dict[int, str]:
    """Without the index: messages holding `text` as it was typed, newest chat first."""
    rows = db.execute(
        "SELECT m.conversation_id, m.content FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE m.content LIKE ? ORDER BY c.updated DESC, m.id LIMIT ?", (f"%{text}%", MAX_HITS)).fetchall()
    best: dict[int, str] = {}
    for cid, content in rows:
        if int(cid) not in best:
            best[int(cid)] = snippet_around(str(content), text)
    return best


def snippet_around(content: str, text: str, width: int = 80) -> str:
    """A snippet of `content` around the first place it holds `text` (any case)."""
    at = content.lower().find(text.lower())
    if at < 0:
        return ""
    start, end = max(0, at - width // 2), min(len(content), at + len(text) + width // 2)
    return ("…" if start else "") + " ".join(content[start:end].split()) + ("…" if end < len(content) else "")
