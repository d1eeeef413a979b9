"""Edited questions keep their earlier branch. Edit and Send used to delete the question and
everything after it; now the question gets versions, as an answer does with Regenerate:
each version is the question's text and the conversation that followed it (its tail), and
"‹ 1/2 ›" under the question switches between them.

The chosen version lives in the messages table as before (so every reader, export and older
Tandem sees one plain conversation); the others wait in `question_versions`, their tails as
JSON: every later message with its answer versions and its own question versions (an edit
inside a branch), so switching back and forth loses nothing.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import AbstractContextManager
from typing import Any, Protocol

SCHEMA = """
CREATE TABLE IF NOT EXISTS question_versions (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    content TEXT NOT NULL,
    spans TEXT,
    tail TEXT NOT NULL DEFAULT '[]',
    created REAL NOT NULL,
    PRIMARY KEY (message_id, n)
);
"""

_MESSAGE = ("role", "content", "stats", "spans", "status", "created", "version")
_ANSWER_VERSION = ("n", "content", "stats", "spans", "status", "created")
_QUESTION_VERSION = ("n", "content", "spans", "tail", "created")


class _VersionedMessages(Protocol):
    """What branching needs of the History: a write and a message by id."""

    def _write(self, what: str) -> AbstractContextManager[sqlite3.Connection]: ...
    def message(self, message_id: int) -> Any: ...


def edit_question(history: _VersionedMessages, message_id: int, content: str, spans: list[tuple[int, str]]) -> Any:
    """Make `content` a new version of question `message_id` and choose it: the version shown
    until now keeps its text and what followed it; the conversation after the question is
    cleared for the new answer. Returns the question (a Message)."""
    now = time.time()
    with history._write("the edited message") as db:
        cid, _version = _place(db, message_id)
        _keep_current(db, cid, message_id)
        n = int(db.execute("SELECT COALESCE(MAX(n), 0) + 1 FROM question_versions WHERE message_id=?",
                           (message_id,)).fetchone()[0])
        db.execute("UPDATE messages SET content=?, spans=?, version=? WHERE id=?",
                   (content, json.dumps(spans), n, message_id))
        db.execute("INSERT INTO question_versions(message_id, n, content, spans, tail, created) VALUES (?,?,?,?,'[]',?)",
                   (message_id, n, content, json.dumps(spans), now))
        db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, cid))
    return history.message(message_id)


def choose_question(history: _VersionedMessages, message_id: int, n: int) -> Any:
    """Show version `n` of question `message_id` and the conversation that followed it; the
    version shown until now is kept with its own. KeyError when there is no such version."""
    with history._write("the chosen version of the message") as db:
        row = db.execute("SELECT content, spans, tail FROM question_versions WHERE message_id=? AND n=?",
                         (message_id, n)).fetchone()
        if row is None:
            raise KeyError(f"message {message_id} has no version {n}")
        cid, version = _place(db, message_id)
        if version != n:
            _keep_current(db, cid, message_id)
            db.execute("UPDATE messages SET content=?, spans=?, version=? WHERE id=?",
                       (row[0], row[1], n, message_id))
            for m in json.loads(row[2]):
                _restore(db, cid, m)
    return history.message(message_id)


def _place(db: sqlite3.Connection, message_id: int) -> tuple[int, int]:
    row = db.execute("SELECT conversation_id, version FROM messages WHERE id=?", (message_id,)).fetchone()
    if row is None:
        raise KeyError(f"no message {message_id}")
    return int(row[0]), int(row[1] or 1)


def _keep_current(db: sqlite3.Connection, cid: int, message_id: int) -> None:
    """Store the question as shown, with its tail, as its current version; then clear the tail."""
    q = db.execute("SELECT content, spans, created, version FROM messages WHERE id=?", (message_id,)).fetchone()
    tail = [_snapshot(db, r) for r in db.execute(
        f"SELECT id, {', '.join(_MESSAGE)} FROM messages WHERE conversation_id=? AND id>? ORDER BY id",
        (cid, message_id)).fetchall()]
    db.execute("INSERT INTO question_versions(message_id, n, content, spans, tail, created) VALUES (?,?,?,?,?,?) "
               "ON CONFLICT(message_id, n) DO UPDATE SET content=excluded.content, spans=excluded.spans, "
               "tail=excluded.tail", (message_id, int(q[3] or 1), q[0], q[1], json.dumps(tail), q[2]))
    db.execute("DELETE FROM messages WHERE conversation_id=? AND id>?", (cid, message_id))


def _snapshot(db: sqlite3.Connection, row: sqlite3.Row | tuple) -> dict:
    """A message of a tail with everything hanging from it (answer and question versions)."""
    mid = row[0]
    return {"message": dict(zip(_MESSAGE, tuple(row)[1:])),
            "answers": [dict(zip(_ANSWER_VERSION, tuple(v))) for v in db.execute(
                f"SELECT {', '.join(_ANSWER_VERSION)} FROM answer_versions WHERE message_id=? ORDER BY n", (mid,))],
            "questions": [dict(zip(_QUESTION_VERSION, tuple(v))) for v in db.execute(
                f"SELECT {', '.join(_QUESTION_VERSION)} FROM question_versions WHERE message_id=? ORDER BY n", (mid,))]}


def _restore(db: sqlite3.Connection, cid: int, snap: dict) -> None:
    """Insert a snapshot's message (a new id, at the end of the conversation) and its versions."""
    m = snap["message"]
    new = db.execute(f"INSERT INTO messages(conversation_id, {', '.join(_MESSAGE)}) VALUES (?{', ?' * len(_MESSAGE)})",
                     (cid, *(m[k] for k in _MESSAGE))).lastrowid
    db.executemany(f"INSERT INTO answer_versions(message_id, {', '.join(_ANSWER_VERSION)}) "
                   f"VALUES (?{', ?' * len(_ANSWER_VERSION)})",
                   [(new, *(v[k] for k in _ANSWER_VERSION)) for v in snap["answers"]])
    db.executemany(f"INSERT INTO question_versions(message_id, {', '.join(_QUESTION_VERSION)}) "
                   f"VALUES (?{', ?' * len(_QUESTION_VERSION)})",
                   [(new, *(v[k] for k in _QUESTION_VERSION)) for v in snap["questions"]])
