"""A history database the user cannot write (as the previous release left it: the layout
before answer versions, in WAL mode) is opened without migrating: its chats are shown, the
window is told why nothing new is saved, no side file is left read-only, and once the
permission is fixed the next start migrates it and saves again.

The checks run in a child process that really cannot write the file: as root (where a
chmod stops nothing) the child keeps uid 0 but loses the capabilities that bypass file
permissions (`setpriv --bounding-set`), so the kernel refuses the writes as it would a user's.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from history_schemas import OLD_SCHEMA

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import json, sys
from app.history import History
h = History(sys.argv[1])
titles = [c.title for c in h.conversations()]
answers = [h.messages(c.id)[-1].content for c in h.conversations()]
c = h.create("new in this session")
h.add_message(c.id, "user", "hello")
h.close()
print(json.dumps({"titles": titles, "answers": answers, "read_only": getattr(h, "read_only", None), "notice": h.notice}))
"""


def _previous_release_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(OLD_SCHEMA)
    for c in range(1, 4):
        db.execute("INSERT INTO conversations(title, created, updated) VALUES (?, ?, ?)", (f"chat {c}", c, c))
        db.execute("INSERT INTO messages(conversation_id, role, content, spans, created) VALUES (?, 'user', ?, '[]', ?)",
                   (c, f"question {c}", c))
        db.execute("INSERT INTO messages(conversation_id, role, content, spans, status, created) "
                   "VALUES (?, 'assistant', ?, '[]', 'complete', ?)", (c, f"answer {c}", c))
    db.commit()
    db.close()  # the last connection: the WAL is folded in and removed, as after a clean exit


def refuse_writes(monkeypatch) -> None:
    """SQLite refuses to write the file (as for a file another user owns): a read-only copy."""
    import app.history.store as history

    real = history._connect

    def refusing(p: str) -> sqlite3.Connection:
        if p != ":memory:":
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(p)

    monkeypatch.setattr(history, "_connect", refusing)


def _unprivileged(args: list[str]) -> list[str]:
    """`args` run so that file permissions bind, also when the tests run as root."""
    if os.geteuid() != 0:
        return args
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: nothing here can make a file unwritable")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner,-linux_immutable", *args]


def _open_as_user(path: Path, code: str = CHILD) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(_unprivileged([sys.executable, "-c", code, str(path)]), capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_read_only_old_database_shows_its_chats_says_why_and_migrates_once_writable(tmp_path):
    path = tmp_path / "history.db"
    _previous_release_database(path)
    before = path.read_bytes()
    path.chmod(0o444)
    if os.geteuid() == 0:  # the child must really be refused (a kernel that ignores the dropped capabilities)
        probe = subprocess.run(_unprivileged([sys.executable, "-c", f"open({str(path)!r}, 'r+b')"]), capture_output=True)
        if probe.returncode == 0:
            pytest.skip("this system lets the child write a read-only file")

    got = _open_as_user(path)
    assert got["titles"] == ["chat 3", "chat 2", "chat 1"], "the chats of a read-only database are shown"
    assert got["answers"] == ["answer 3", "answer 2", "answer 1"]
    assert got["read_only"] is True
    assert "read-only" in got["notice"] and "nothing new is saved" in got["notice"] and str(path) in got["notice"]
    assert _files(tmp_path) == ["history.db"], "no -wal/-shm left behind (read-only, they would block later writes)"
    assert path.read_bytes() == before, "not migrated, not changed"

    path.chmod(0o644)  # the user fixes the permission: the next start migrates and saves
    got = _open_as_user(path)
    assert got["read_only"] is False and got["notice"] is None
    assert got["titles"] == ["chat 3", "chat 2", "chat 1"]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] >= 2
    assert [r[0] for r in db.execute("SELECT title FROM conversations ORDER BY id")][-1] == "new in this session"
    db.close()


def test_side_files_an_earlier_version_left_read_only_do_not_block_saving(tmp_path):
    """The previous release opened a read-only database read-write: SQLite created its
    -wal and -shm with the file's mode (0444). After the user makes the database writable
    again, those must not keep every save failing."""
    path = tmp_path / "history.db"
    _previous_release_database(path)
    path.chmod(0o444)
    leave = ("import sqlite3, sys; db = sqlite3.connect(sys.argv[1])\n"
             "try:\n db.execute('ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 1')\n"
             "except sqlite3.OperationalError: pass\n"
             "print('{}')")
    _open_as_user(path, leave)
    if not (tmp_path / "history.db-shm").exists():
        pytest.skip("this SQLite left no side files")
    path.chmod(0o644)
    got = _open_as_user(path)
    assert got["notice"] is None and len(got["titles"]) == 3 and not got["read_only"]
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT title FROM conversations ORDER BY id")][-1] == "new in this session"
    db.close()


def test_a_refusal_the_checks_did_not_foresee_still_shows_the_chats(tmp_path, monkeypatch):
    """SQLite says read-only although the file looked writable (a security policy, a file
    another user owns): the chats are still shown from a read-only copy."""
    import app.history.store as history

    path = tmp_path / "history.db"
    _previous_release_database(path)
    refuse_writes(monkeypatch)
    h = history.History(path)
    assert [c.title for c in h.conversations()] == ["chat 3", "chat 2", "chat 1"] and h.read_only
    assert "read-only" in h.notice
    h.close()
    assert _files(tmp_path) == ["history.db"]


def test_the_window_says_why_nothing_new_is_saved_and_shows_the_chats(qtbot, tmp_path, monkeypatch):
    """The banner above the pages carries the reason (here the read-only check is answered
    for the test: the real refusal is exercised in the child processes above)."""
    pytest.importorskip("PySide6")
    pytest.importorskip("pytestqt")
    import app.history.store as history
    from test_gui_chat_input import _make_window

    _previous_release_database(tmp_path / "h.db")
    monkeypatch.setattr(history, "read_only_reason", lambda path: "the file is read-only")
    w = _make_window(qtbot, tmp_path, monkeypatch)
    assert w.history.read_only and not w.history_notice.isHidden()
    assert "read-only" in w.history_notice.text() and "nothing new is saved" in w.history_notice.text()
    assert w.chat.conv_list.count() == 3, "the chats are listed"
    w.close()
