"""What the user does to a stored chat's messages besides asking: delete one, fork from one.

Delete removes what is shown, never what is not: an answer with other versions loses the
version shown (the one before it is shown instead; the rest keep their order, renumbered); an
edited question with other versions loses the version shown with the conversation that followed
it on that branch (it belongs to that version; the neighbouring version is shown with its own).
A question or answer with no other version leaves the chat: a question takes its answer with it
(an answer without its question would answer nothing); later messages stay.

Fork makes a new chat holding the conversation up to an answer as shown, each answer with its
versions and the chat's settings and folder; the other branches of edited questions stay in
the original. The original is not changed.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from .branches import _ANSWER_VERSION, choose_question
from .pictures import prune


def _versions(db: sqlite3.Connection, table: str, message_id: int) -> list[int]:
    return [int(r[0]) for r in db.execute(f"SELECT n FROM {table} WHERE message_id=? ORDER BY n", (message_id,))]


def _drop_version(db: sqlite3.Connection, table: str, message_id: int, n: int) -> None:
    """Remove version `n` and number the later ones down by one (the "‹ 2/3 ›" links step by one)."""
    db.execute(f"DELETE FROM {table} WHERE message_id=? AND n=?", (message_id, n))
    for later in _versions(db, table, message_id):
        if later > n:  # one by one, upwards: (message_id, n) stays unique at every step
            db.execute(f"UPDATE {table} SET n=? WHERE message_id=? AND n=?", (later - 1, message_id, later))
    db.execute("UPDATE messages SET version=version-1 WHERE id=? AND version>?", (message_id, n))


def delete_shown(history: Any, message_id: int) -> str:
    """Delete message `message_id` as the module's docstring says; returns what went, in words
    ("the answer's version 2", "the question and its answer", ...). KeyError when it is gone."""
    m = history.message(message_id)
    if m.role == "assistant" and m.versions > 1:
        with history._write("the deletion of the answer's version") as db:
            _drop_version(db, "answer_versions", message_id, m.version)
        history.choose_version(message_id, max(m.version - 1, 1))
        return f"the answer's version {m.version}"
    if m.role == "user" and m.versions > 1:
        shown = m.version
        choose_question(history, message_id, shown - 1 if shown > 1 else shown + 1)
        with history._write("the deletion of the message's version") as db:
            _drop_version(db, "question_versions", message_id, shown)
            prune(db)
        return f"version {shown} of the message and what followed it"
    with history._write("the deletion of the message") as db:
        ids = [message_id]
        if m.role == "user":
            after = db.execute("SELECT id, role FROM messages WHERE conversation_id=? AND id>? ORDER BY id LIMIT 1",
                               (m.conversation_id, message_id)).fetchone()
            if after is not None and after[1] == "assistant":
                ids.append(int(after[0]))
        db.executemany("DELETE FROM messages WHERE id=?", [(i,) for i in ids])
        db.execute("UPDATE conversations SET updated=? WHERE id=?", (time.time(), m.conversation_id))
        prune(db)  # its pictures, unless another message names them
    return "the message and its answer" if len(ids) == 2 else "the message"


def fork_at(history: Any, answer_id: int) -> Any:
    """A new chat holding the conversation up to answer `answer_id` (see the module's
    docstring); returns it (a Conversation). KeyError when the answer is gone."""
    answer = history.message(answer_id)
    conv = history.get(answer.conversation_id)
    if conv is None or answer.role != "assistant":
        raise KeyError(answer_id)
    now = time.time()
    with history._write("the forked chat") as db:
        cid = db.execute("INSERT INTO conversations(title, system_prompt, created, updated, folder) VALUES (?,?,?,?,?)",
                         (f"{conv.title} (fork)", conv.system_prompt, now, now, conv.folder)).lastrowid
        db.execute("INSERT INTO chat_settings(conversation_id, settings) SELECT ?, settings FROM chat_settings "
                   "WHERE conversation_id=?", (cid, conv.id))
        rows = db.execute("SELECT id, role, content, stats, spans, status, created, version FROM messages "
                          "WHERE conversation_id=? AND id<=? ORDER BY id", (conv.id, answer_id)).fetchall()
        for r in rows:
            mid = db.execute("INSERT INTO messages(conversation_id, role, content, stats, spans, status, created, version) "
                             "VALUES (?,?,?,?,?,?,?,?)", (cid, *tuple(r)[1:7], r[7] if r[1] == "assistant" else 1)).lastrowid
            db.execute(f"INSERT INTO answer_versions(message_id, {', '.join(_ANSWER_VERSION)}) "
                       f"SELECT ?, {', '.join(_ANSWER_VERSION)} FROM answer_versions WHERE message_id=?", (mid, r[0]))
    return history.get(cid)
