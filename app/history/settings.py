"""Each chat keeps its generation settings (drafter, lookahead, temperature, top-p, seed, max
tokens): a report written at temperature 0.7 and a code review at 0 no longer share one set
of controls. Stored beside the conversations (its system prompt is already the
conversation's own), as JSON so a later setting needs no new column."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import AbstractContextManager
from typing import Any, Protocol

SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_settings (
    conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    settings TEXT NOT NULL
);
"""


class _SettingsDatabase(Protocol):
    """What the chat settings need of the History: its database, lock and writes."""

    _db: sqlite3.Connection
    _lock: threading.Lock

    def _write(self, what: str) -> AbstractContextManager[sqlite3.Connection]: ...


def save_chat_settings(history: _SettingsDatabase, conversation_id: int, settings: dict[str, Any]) -> None:
    """Keep `settings` as the chat's own (HistoryError when the write fails)."""
    with history._write("the chat's settings") as db:
        db.execute("INSERT INTO chat_settings(conversation_id, settings) VALUES (?, ?) "
                   "ON CONFLICT(conversation_id) DO UPDATE SET settings=excluded.settings",
                   (conversation_id, json.dumps(settings)))


def chat_settings(history: _SettingsDatabase, conversation_id: int) -> dict[str, Any] | None:
    """The chat's settings, or None: never saved (a chat from before), or unreadable."""
    try:
        with history._lock:
            row = history._db.execute("SELECT settings FROM chat_settings WHERE conversation_id=?",
                                      (conversation_id,)).fetchone()
        value = json.loads(row[0]) if row else None
    except (sqlite3.Error, ValueError):
        return None
    return value if isinstance(value, dict) else None
