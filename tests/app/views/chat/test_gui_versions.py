"""Issue 26: Regenerate keeps every answer ("‹ 1/3 ›" under it, by mouse and by keyboard),
the versions live in the history database (an old database gains them without losing a
conversation), a reopen shows them and an export writes the chosen one; a sent file is a
card with its name, size and tokens. Each GUI test clicks as a user would."""

from __future__ import annotations

import sqlite3

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QTextCursor  # noqa: E402

from app.history import History  # noqa: E402
from history_schemas import OLD_SCHEMA  # noqa: E402
from test_gui_chat_input import _load, _make_window  # noqa: E402
from test_gui_transcript import _fragments, click_anchor  # noqa: E402


def _old_database(path) -> None:
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    for c in range(1, 4):
        db.execute("INSERT INTO conversations(title, created, updated) VALUES (?, ?, ?)", (f"chat {c}", c, c))
        db.execute("INSERT INTO messages(conversation_id, role, content, spans, created) VALUES (?, 'user', ?, '[]', ?)",
                   (c, f"question {c}", c))
        db.execute("INSERT INTO messages(conversation_id, role, content, stats, spans, status, created) "
                   "VALUES (?, 'assistant', ?, '{\"generated_tokens\": 3}', '[[8, \"draft\"]]', 'stopped', ?)",
                   (c, f"answer {c}", c))
    db.commit()
    db.close()


def test_an_old_database_gains_versions_and_keeps_every_conversation(tmp_path):
    path = tmp_path / "h.db"
    _old_database(path)
    h = History(path)
    assert h.notice is None and h.backup is None, "migrated in place, not set aside"
    assert [c.title for c in h.conversations()] == ["chat 3", "chat 2", "chat 1"]
    for c in h.conversations():
        q, a = h.messages(c.id)
        assert (q.content, a.content, a.status, a.stats, a.spans) == \
            (f"question {c.id}", f"answer {c.id}", "stopped", {"generated_tokens": 3}, [(8, "draft")])
        assert (a.version, a.versions) == (1, 1)
    a = h.messages(2)[1]
    fresh = h.new_version(a.id)
    assert (fresh.content, fresh.status, fresh.version, fresh.versions) == ("", "generating", 2, 2)
    h.update_message(a.id, "answer 2, again", stats={"generated_tokens": 4}, spans=[(15, "target")], status="complete")
    h.close()
    h = History(path)  # reopened: both versions there, the new one chosen
    now = h.messages(2)[1]
    assert (now.content, now.version, now.versions) == ("answer 2, again", 2, 2)
    first = h.choose_version(a.id, 1)
    assert (first.content, first.status, first.stats, first.spans) == \
        ("answer 2", "stopped", {"generated_tokens": 3}, [(8, "draft")])
    assert "answer 2\n" in h.to_markdown(2) and "again" not in h.to_markdown(2), "the export is the chosen version"
    with pytest.raises(KeyError):
        h.choose_version(a.id, 3)
    h.delete_messages_from(2, a.id)  # an edit of the question drops the answer and its versions
    assert h.messages(2)[-1].role == "user"
    assert h._db.execute("SELECT COUNT(*) FROM answer_versions").fetchone()[0] == 0
    assert h._db.execute("PRAGMA user_version").fetchone()[0] >= 2
    h.close()
    db = sqlite3.connect(path)  # an older Tandem reads it as it did: its columns are all there
    assert db.execute("SELECT role, content, status FROM messages WHERE conversation_id=1 ORDER BY id").fetchall() == \
        [("user", "question 1", "complete"), ("assistant", "answer 1", "stopped")]
    db.close()


def test_a_damaged_database_salvages_the_versions_too(tmp_path):
    path = tmp_path / "h.db"
    h = History(path)
    c = h.create("kept")
    h.add_message(c.id, "user", "q")
    a = h.add_message(c.id, "assistant", "first")
    h.new_version(a.id)
    h.update_message(a.id, "second", status="complete")
    h.close()
    from app.history.repair import salvage

    fresh = History(tmp_path / "fresh.db")
    assert salvage(path, fresh._db) == (1, 1)
    [conv] = fresh.conversations()
    b = fresh.messages(conv.id)[1]
    assert (b.content, b.version, b.versions) == ("second", 2, 2)
    assert fresh.choose_version(b.id, 1).content == "first"


# -- the chat window -----------------------------------------------------------------------------------
@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, tiny_target)
    w.resize(1360, 860)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def _answer(chat):
    return chat.history.messages(chat.conversation_id)[-1]


def _version_label(chat) -> str:
    """The "n/N" text the transcript shows between the arrows (what a reader sees)."""
    text = chat.transcript.toPlainText()
    found = [w for w in text.replace("‹", " ").replace("›", " ").split() if "/" in w and w.replace("/", "").isdigit()]
    return found[-1] if found else ""


def _regenerate(qtbot, chat, seed: int) -> None:
    chat.seed.setText(str(seed))
    click_anchor(qtbot, chat.transcript, f"msg:regenerate:{_answer(chat).id}")
    qtbot.waitUntil(lambda: chat.worker is None and _answer(chat).status != "generating", timeout=30000)


def _focus_link(qtbot, tr, href: str) -> None:
    """Tab through the transcript's links, as a keyboard user does, until `href` has focus."""
    tr.setFocus()
    tr.moveCursor(QTextCursor.MoveOperation.Start)
    for _ in range(40):
        qtbot.keyClick(tr, Qt.Key.Key_Tab)
        c = QTextCursor(tr.document())
        c.setPosition(tr.textCursor().selectionStart() + 1)  # the format of the selection's first character
        if tr.textCursor().hasSelection() and c.charFormat().anchorHref() == href:
            return
    raise AssertionError(f"Tab never reached {href}")


def test_regenerate_keeps_versions_browsable_reopenable_and_exported_as_chosen(qtbot, window, tmp_path, monkeypatch):
    chat = window.chat
    chat.apply_settings({"drafter": "lookup", "lookahead": 4, "temperature": 1.0, "seed": 1, "max_tokens": 12})
    chat.prompt.setPlainText("the value of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    first = _answer(chat)
    assert _version_label(chat) == "", "one answer: no version arrows"
    _regenerate(qtbot, chat, 2)
    assert _version_label(chat) == "2/2"
    _regenerate(qtbot, chat, 3)
    third = _answer(chat)
    assert third.id == first.id and (third.version, third.versions) == (3, 3)
    assert _version_label(chat) == "3/3"
    texts = [first.content, chat.history.choose_version(first.id, 2).content, third.content]
    chat.history.choose_version(first.id, 3)
    assert len(set(texts)) == 3 and all(texts), f"three different answers to browse: {texts}"
    assert f"msg:newer:{first.id}" not in {f.charFormat().anchorHref() for _, f in _fragments(chat.transcript)}

    click_anchor(qtbot, chat.transcript, f"msg:older:{first.id}")  # ‹ with the mouse
    assert _version_label(chat) == "2/3" and _answer(chat).content == texts[1]
    _focus_link(qtbot, chat.transcript, f"msg:older:{first.id}")  # ‹ again with the keyboard: Tab, Enter
    qtbot.keyClick(chat.transcript, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _version_label(chat) == "1/3", timeout=60000)
    assert texts[0] in chat.transcript.toPlainText() and texts[2] not in chat.transcript.toPlainText()
    assert _answer(chat).content == texts[0], "the choice is stored"

    path = tmp_path / "export.md"  # the export writes the chosen version
    chat.export_conversation(str(path))
    exported = path.read_text(encoding="utf-8")
    assert texts[0] in exported and texts[2] not in exported and texts[1] not in exported

    window.close()  # reopen: a new window on the same database
    w2 = _make_window(qtbot, tmp_path, monkeypatch)
    w2.resize(1360, 860)
    w2.show()
    qtbot.waitExposed(w2)
    item = w2.chat.conv_list.item(0)
    qtbot.mouseClick(w2.chat.conv_list.viewport(), Qt.MouseButton.LeftButton,
                     pos=w2.chat.conv_list.visualItemRect(item).center())
    qtbot.waitUntil(lambda: w2.chat.conversation_id == first.conversation_id, timeout=60000)
    assert _version_label(w2.chat) == "1/3" and texts[0] in w2.chat.transcript.toPlainText()
    click_anchor(qtbot, w2.chat.transcript, f"msg:newer:{first.id}")
    assert _version_label(w2.chat) == "2/3" and texts[1] in w2.chat.transcript.toPlainText()
    w2.close()


def test_edit_and_continue_still_work_with_versions(qtbot, window):
    chat = window.chat
    chat.apply_settings({"drafter": "lookup", "lookahead": 4, "temperature": 0.0, "max_tokens": 4})
    chat.prompt.setPlainText("the value of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    _regenerate(qtbot, chat, 1)
    answer = _answer(chat)
    assert answer.stats.get("finish_reason") == "length" and _version_label(chat) == "2/2"
    click_anchor(qtbot, chat.transcript, f"msg:continue:{answer.id}")  # Continue writes onto version 2
    qtbot.waitUntil(lambda: chat.worker is None and _answer(chat).status != "generating", timeout=30000)
    longer = _answer(chat)
    assert longer.content.startswith(answer.content) and len(longer.content) > len(answer.content)
    assert (longer.version, longer.versions) == (2, 2) and _version_label(chat) == "2/2"
    assert chat.history.choose_version(answer.id, 2).content == longer.content, "the version holds the continued text"
    user = chat.history.messages(chat.conversation_id)[0]
    click_anchor(qtbot, chat.transcript, f"msg:edit:{user.id}")  # Edit the question: a new answer, the old branch kept
    chat.prompt.setPlainText("the class of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    msgs = chat.history.messages(chat.conversation_id)
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[0].content == "the class of"
    assert (msgs[1].version, msgs[1].versions) == (1, 1), "the new answer has one version"
    assert (msgs[0].version, msgs[0].versions) == (2, 2) and _version_label(chat) == "2/2", "the question has two"


def test_a_sent_file_card_shows_name_size_and_the_models_token_count(qtbot, tmp_path, monkeypatch, tiny_target):
    from app.widgets.transcript.file_card import FileViewer

    w = _make_window(qtbot, tmp_path, monkeypatch)
    w.resize(1360, 860)
    w.show()
    chat = w.chat
    body = "def value(x):\n    return x * 2\n" * 10
    f = tmp_path / "code.py"
    f.write_text(body, encoding="utf-8")
    h = w.history  # a conversation with the file sent, shown before any model is loaded
    c = h.create("with a file")
    from app.widgets.attachments.attachments import Attachment, attachment_block

    h.add_message(c.id, "user", "\n\n".join(["look", attachment_block(Attachment("code.py", body, 0, False))]))
    h.add_message(c.id, "assistant", "ok")
    chat.refresh_conversations()
    chat.open_conversation(c.id)
    shown = chat.transcript.toPlainText()
    assert "\ufffc code.py · 310 B · tokens: no model loaded" in shown, "no model: it says so, no guess"
    _load(qtbot, w, tiny_target)
    n = len(w.session.engine.target.tokenize(body, add_special=False, parse_special=False))
    qtbot.waitUntil(lambda: f"\ufffc code.py · 310 B · {n:,} tokens" in chat.transcript.toPlainText(), timeout=60000)
    user = h.messages(c.id)[0]
    click_anchor(qtbot, chat.transcript, f"msg:file:{user.id}:0")
    viewer = chat.transcript.findChild(FileViewer)
    assert viewer is not None and viewer.isVisible() and viewer.text.toPlainText() == body
    w.close()

