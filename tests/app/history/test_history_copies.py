"""The copies of a chat history made when its file cannot be used as it is (moved aside as
damaged and salvaged, or read-only and shown from memory) carry everything a conversation
has: its edited questions' earlier versions, with what followed them, and its own settings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import app.history.store as history
from app.history.branches import choose_question, edit_question
from app.history.repair import Damaged
from app.history.settings import chat_settings, save_chat_settings
from test_history_readonly import refuse_writes

SETTINGS = {"drafter": "lookup", "lookahead": 8, "temperature": 0.7}


def _with_branches_and_settings(path: Path) -> None:
    h = history.History(path)
    c = h.create("edited chat")
    q = h.add_message(c.id, "user", "first question")
    h.add_message(c.id, "assistant", "first answer")
    edit_question(h, q.id, "second question", [])
    h.add_message(c.id, "assistant", "second answer")
    save_chat_settings(h, c.id, SETTINGS)
    h.close()


def _check_copy(h: history.History) -> None:
    (c,) = h.conversations()
    q, a = h.messages(c.id)
    assert (q.content, q.version, q.versions) == ("second question", 2, 2)
    assert a.content == "second answer"
    assert chat_settings(h, c.id) == SETTINGS
    choose_question(h, q.id, 1)  # the earlier branch came over with what followed it
    assert [m.content for m in h.messages(c.id)] == ["first question", "first answer"]


def test_a_read_only_copy_keeps_question_versions_and_chat_settings(tmp_path, monkeypatch):
    path = tmp_path / "history.db"
    _with_branches_and_settings(path)
    refuse_writes(monkeypatch)
    h = history.History(path)
    assert h.read_only
    _check_copy(h)
    h.close()


def test_a_salvaged_copy_keeps_question_versions_and_chat_settings(tmp_path, monkeypatch):
    path = tmp_path / "history.db"
    _with_branches_and_settings(path)
    real = history._connect
    calls: list[str] = []

    def damaged_once(p: str) -> sqlite3.Connection:
        calls.append(p)
        if len(calls) == 1:  # the first open finds damage; the fresh database after it is fine
            raise Damaged("*** in database main *** Page 7: btreeInitPage() returns error code 11")
        return real(p)

    monkeypatch.setattr(history, "_connect", damaged_once)
    h = history.History(path)
    assert h.backup is not None and "1 of 1 conversations" in (h.notice or "")
    _check_copy(h)
    h.close()


@pytest.mark.parametrize("drop", ["question_versions", "chat_settings"])
def test_a_copy_of_a_database_from_before_those_tables_still_works(tmp_path, monkeypatch, drop):
    path = tmp_path / "history.db"
    _with_branches_and_settings(path)
    with sqlite3.connect(path) as db:
        db.execute(f"DROP TABLE {drop}")
    db.close()
    refuse_writes(monkeypatch)
    h = history.History(path)
    assert h.read_only
    (c,) = h.conversations()
    assert [m.content for m in h.messages(c.id)] == ["second question", "second answer"]
    assert (chat_settings(h, c.id) is None) == (drop == "chat_settings")
    h.close()
