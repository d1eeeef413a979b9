"""Issue 12, item 4: a damaged chat-history database never stops the app or loses data.

The damaged file is moved aside with a timestamp (never deleted), a fresh database is
started, readable conversations are copied over, and the window says where the old file is.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from app.history import History, HistoryError


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _filled(path: Path, conversations: int = 30) -> None:
    h = History(path)
    for i in range(conversations):
        c = h.create(f"chat {i}")
        h.add_message(c.id, "user", f"question {i} " + "q" * 3000)
        h.add_message(c.id, "assistant", f"answer {i} " + "a" * 3000, stats={"generated_tokens": 5}, spans=[(5, "draft")])
    h.close()
    with sqlite3.connect(path) as db:  # fold the WAL in so the damage below hits the file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _damage_a_message_page(path: Path) -> None:
    """Scribble over the header of one leaf page of the messages table, mid-file."""
    with sqlite3.connect(path) as db:
        page = db.execute("PRAGMA page_size").fetchone()[0]
        try:
            leaves = [r[0] for r in db.execute(
                "SELECT pageno FROM dbstat WHERE name='messages' AND pagetype='leaf' ORDER BY pageno")]
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table to find a page to damage")
    victim = leaves[len(leaves) // 2]
    with open(path, "r+b") as f:
        f.seek((victim - 1) * page)
        f.write(b"\xde\xad\xbe\xef" * 16)


def test_a_file_that_is_not_a_database_is_moved_aside(tmp_path):
    db = tmp_path / "history.db"
    db.write_bytes(b"this is not sqlite at all\n" * 100)
    before = _digest(db)
    h = History(db)
    assert h.backup is not None and h.backup.exists() and h.backup.parent == tmp_path
    assert h.backup.name.startswith("history.corrupt-") and h.backup.suffix == ".db"
    assert _digest(h.backup) == before  # nothing the user had is changed or deleted
    assert str(h.backup) in h.notice and "0 of 0 conversations" in h.notice
    c = h.create("fresh")  # the new database works
    h.add_message(c.id, "user", "hello")
    assert [m.content for m in h.messages(c.id)] == ["hello"]
    h.close()
    assert History(db).notice is None  # and is healthy next time


def test_a_partly_damaged_database_is_salvaged(tmp_path):
    db = tmp_path / "history.db"
    _filled(db)
    _damage_a_message_page(db)
    with sqlite3.connect(db) as raw:
        try:
            assert raw.execute("PRAGMA quick_check").fetchone()[0] != "ok"
        except sqlite3.DatabaseError:
            pass  # malformed: the check itself fails
    before = _digest(db)
    h = History(db)
    assert h.backup is not None and _digest(h.backup) == before
    convs = h.conversations()
    assert 0 < len(convs) < 30  # what reads cleanly comes over; the damaged conversation does not
    assert f"{len(convs)} of 30 conversations" in h.notice
    for c in convs:  # every copied conversation is whole
        msgs = h.messages(c.id)
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert msgs[1].stats == {"generated_tokens": 5} and msgs[1].spans == [(5, "draft")]
    h.close()


def test_the_wal_moves_with_the_database(tmp_path):
    db = tmp_path / "history.db"
    db.write_bytes(b"garbage" * 1000)
    wal = Path(str(db) + "-wal")
    wal.write_bytes(b"wal bytes")
    h = History(db)
    assert Path(str(h.backup) + "-wal").read_bytes() == b"wal bytes"
    h.close()


def test_an_unopenable_location_gives_an_in_memory_history(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    h = History(blocker / "sub" / "history.db")  # parent is a file: cannot be created
    assert h.backup is None and "will not be saved" in h.notice
    c = h.create("still works")
    assert h.get(c.id).title == "still works"
    assert blocker.read_text() == "x"
    h.close()


def test_read_errors_after_open_raise_history_error(tmp_path):
    h = History(tmp_path / "h.db")
    c = h.create("x")
    h._db.execute("DROP TABLE messages")  # stands in for a page that went bad after the check
    with pytest.raises(HistoryError, match="cannot read this conversation from"):
        h.messages(c.id)
    h.close()


# -- the window -------------------------------------------------------------------------------
pytest.importorskip("PySide6")


@pytest.fixture
def make_window(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.main_window import MainWindow

    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: QMessageBox.StandardButton.Ok)

    def make(history: History) -> MainWindow:
        w = MainWindow(history=history, settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                       autoload=False)
        qtbot.addWidget(w)
        return w

    return make


def test_window_starts_on_a_corrupt_database_and_says_where_the_old_file_is(make_window, tmp_path):
    db = tmp_path / "history.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    w = make_window(History(db))
    w.show()
    assert w.history_notice.isVisible()
    assert str(w.history.backup) in w.history_notice.text()
    w.close()


def test_an_unreadable_conversation_shows_an_error_in_place(make_window, tmp_path, monkeypatch):
    h = History(tmp_path / "h.db")
    c = h.create("broken one")
    h.add_message(c.id, "user", "hello")
    w = make_window(h)
    assert not w.history_notice.isVisible()

    def broken(conversation_id):
        raise HistoryError(f"cannot read this conversation from {h.path}: database disk image is malformed")

    monkeypatch.setattr(h, "messages", broken)
    w.chat.open_conversation(c.id)
    text = w.chat.transcript.toPlainText()
    assert "could not be read" in text and "malformed" in text and str(h.path) in text
    w.close()


# -- issue 27: a schema from another version, and writes that fail -------------------------------
def test_a_database_with_a_renamed_column_is_moved_aside_not_a_traceback(tmp_path):
    db = tmp_path / "history.db"
    _filled(db, conversations=3)
    with sqlite3.connect(db) as raw:  # what a future version might do
        raw.execute("ALTER TABLE messages RENAME COLUMN status TO state")
    before = _digest(db)
    h = History(db)
    assert h.backup is not None and h.backup.name.startswith("history.other-version-")
    assert _digest(h.backup) == before  # moved whole and unchanged
    assert "layout this version of Tandem does not know" in h.notice and "status" in h.notice
    assert str(h.backup) in h.notice
    c = h.create("fresh")
    h.add_message(c.id, "user", "hello")
    assert [m.content for m in h.messages(c.id)] == ["hello"]
    h.close()


def test_extra_columns_from_a_later_version_are_fine(tmp_path):
    db = tmp_path / "history.db"
    _filled(db, conversations=2)
    with sqlite3.connect(db) as raw:
        raw.execute("ALTER TABLE messages ADD COLUMN reactions TEXT")
    h = History(db)
    assert h.notice is None and len(h.conversations()) == 2
    h.close()


@pytest.mark.parametrize("pragma,says", [
    ("PRAGMA max_page_count = 1", "the disk is full"),  # SQLite's own 'database or disk is full'
    ("PRAGMA query_only = ON", "read-only"),
])
def test_every_failed_write_is_a_history_error_told_to_the_window(tmp_path, pragma, says):
    h = History(tmp_path / "history.db")
    c = h.create("chat")
    told: list[str] = []
    h.on_write_error = told.append
    h._db.execute(pragma)
    writes = [
        lambda: h.create("another " + "t" * 100_000),
        lambda: h.add_message(c.id, "user", "x" * 100_000),
        lambda: h.rename(c.id, "renamed " + "y" * 100_000),
        lambda: h.set_system_prompt(c.id, "z" * 100_000),
    ]
    for write in writes:
        with pytest.raises(HistoryError) as e:
            write()
        assert says in str(e.value) and "Could not save" in str(e.value)
    assert len(told) == len(writes) and all(says in t for t in told)
    h.close()
