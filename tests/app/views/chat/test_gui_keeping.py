"""Chats you can keep, in the window: File → Export all chats / Import chats / Export this chat,
a bad file said in one line with the list as it was, pins on top under a heading, folders in
the list's folder box, search rows with a snippet, Rename, Delete and Fork links under the
messages. Real widgets, driven as a user would."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox  # noqa: E402

from app.history import History  # noqa: E402
from test_gui_chat_input import _make_window  # noqa: E402
from test_gui_transcript import click_anchor  # noqa: E402


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    w.resize(1360, 860)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def _rows(chat) -> list[str]:
    return [chat.conv_list.item(r).text() for r in range(chat.conv_list.count())]


def _chat(h: History, title: str, question: str, answer: str) -> int:
    c = h.create(title)
    h.add_message(c.id, "user", question)
    h.add_message(c.id, "assistant", answer)
    return c.id


def _menu_action(chat, text: str):
    chat.conversations.show_menu(chat.conv_list.visualItemRect(chat.conv_list.currentItem()).center())
    menu = chat.conversations.context_menu
    action = next(a for a in menu.actions() if a.text() == text)
    menu.close()
    return action


def test_file_menu_exports_all_and_imports_into_a_fresh_profile(qtbot, window, tmp_path, monkeypatch):
    w = window
    _chat(w.history, "Budget", "What is the budget?", "10k")
    _chat(w.history, "Trip", "Plan Lisbon", "Day 1 …")
    file_menu = w.menuBar().actions()[0].menu()
    labels = [a.text() for a in file_menu.actions() if a.text()]
    assert labels[:3] == ["Export this chat…", "Export all chats…", "Import chats…"] and labels[-1] == "Quit"
    out = tmp_path / "backup.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "backup"), ""))
    next(a for a in file_menu.actions() if a.text() == "Export all chats…").trigger()
    qtbot.waitUntil(lambda: w.chat.keeping.job is None and out.exists(), timeout=20000)
    assert len(json.loads(out.read_text(encoding="utf-8"))["conversations"]) == 2
    (tmp_path / "other").mkdir()
    w2 = _make_window(qtbot, tmp_path / "other", monkeypatch)  # a fresh profile
    w2.show()
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(out), ""))
    next(a for a in w2.menuBar().actions()[0].menu().actions() if a.text() == "Import chats…").trigger()
    qtbot.waitUntil(lambda: w2.chat.conv_list.count() == 2, timeout=20000)
    assert sorted(t.split("\n")[0] for t in _rows(w2.chat)) == ["Budget", "Trip"]
    assert "2 chats imported from backup.json" in w2.statusBar().currentMessage()
    w2.close()


def test_a_bad_file_is_one_line_and_the_list_stays(qtbot, window, tmp_path):
    w = window
    _chat(w.history, "Keep me", "q", "a")
    w.chat.refresh_conversations()
    bad = tmp_path / "notes.json"
    bad.write_text('{"notes": []}', encoding="utf-8")
    w.chat.import_chats(str(bad))
    qtbot.waitUntil(lambda: w.chat.keeping.job is None and bool(w.errors), timeout=20000)
    assert w.errors == ['notes.json is not a Tandem chat export (it has no "format": "tandem-chats")']
    assert [t.split("\n")[0] for t in _rows(w.chat)] == ["Keep me"]


def test_pin_and_folder_from_the_menu_order_and_filter_the_list(qtbot, window, monkeypatch):
    chat = window.chat
    old = _chat(window.history, "Old report", "q", "a")
    _chat(window.history, "Newer chat", "q", "a")
    chat.refresh_conversations()
    assert [t.split("\n")[0] for t in _rows(chat)] == ["Newer chat", "Old report"] and chat.folder.isHidden()
    chat.open_conversation(old)
    chat.refresh_conversations()
    _menu_action(chat, "Pin to top").trigger()
    assert [t.split("\n")[0] for t in _rows(chat)] == ["Pinned", "Old report", "Chats", "Newer chat"]
    assert _menu_action(chat, "Unpin") is not None, "the menu says what a second click does"
    monkeypatch.setattr(QInputDialog, "exec", lambda d: d.setTextValue("Clients") or 1)
    _menu_action(chat, "Move to folder…").trigger()
    assert chat.folder.isVisibleTo(window) and _rows(chat)[1].startswith("Old report\nClients · today")
    chat.folder.setCurrentIndex(chat.folder.findData("Clients"))
    assert [t.split("\n")[0] for t in _rows(chat)] == ["Pinned", "Old report"]
    chat.folder.setCurrentIndex(chat.folder.findData(""))
    assert [t.split("\n")[0] for t in _rows(chat)] == ["Newer chat"]


def test_search_rows_show_a_snippet_of_what_matched(window):
    chat = window.chat
    _chat(window.history, "Trip", "Plan a week in Lisbon with museums", "Day 1: the Gulbenkian museum")
    _chat(window.history, "Other", "nothing", "here")
    chat.search.setText("gulbenk")
    assert _rows(chat) == ["Trip\nDay 1: the Gulbenkian museum"]
    chat.search.setText("zzzz")
    assert _rows(chat) == ["No conversation matches “zzzz”"]


def test_delete_and_fork_links_under_the_messages(qtbot, window, monkeypatch):
    chat, h = window.chat, window.history
    cid = _chat(h, "Plan", "first question", "first answer")
    h.add_message(cid, "user", "second question")
    last = h.add_message(cid, "assistant", "second answer")
    chat.open_conversation(cid)
    first_answer = h.messages(cid)[1]
    click_anchor(qtbot, chat.transcript, f"msg:fork:{first_answer.id}")
    assert chat.conversation_id != cid and h.get(chat.conversation_id).title == "Plan (fork)"
    assert [m.content for m in h.messages(chat.conversation_id)] == ["first question", "first answer"]
    assert "second question" not in chat.transcript.toPlainText()
    chat.open_conversation(cid)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.No)
    click_anchor(qtbot, chat.transcript, f"msg:delete:{last.id}")
    assert len(h.messages(cid)) == 4, "No keeps it"
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    click_anchor(qtbot, chat.transcript, f"msg:delete:{last.id}")
    assert [m.content for m in h.messages(cid)] == ["first question", "first answer", "second question"]
    assert "second answer" not in chat.transcript.toPlainText() and "Deleted the message" in \
        window.statusBar().currentMessage()
    q2 = h.messages(cid)[2]
    click_anchor(qtbot, chat.transcript, f"msg:edit:{q2.id}")
    assert chat.asking.editing == (cid, q2.id)
    click_anchor(qtbot, chat.transcript, f"msg:delete:{q2.id}")
    assert chat.asking.editing is None, "an edit of a deleted message ends with it"
    assert [m.content for m in h.messages(cid)] == ["first question", "first answer"]


def test_the_chat_export_writes_json_that_imports_again(qtbot, window, tmp_path, monkeypatch):
    chat = window.chat
    cid = _chat(window.history, "Report", "q", "a")
    chat.open_conversation(cid)
    out = tmp_path / "report.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *a, **k: (str(tmp_path / "report"), "Tandem chat, to import again (*.json)"))
    next(a for a in window.menuBar().actions()[0].menu().actions() if a.text() == "Export this chat…").trigger()
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [c["title"] for c in data["conversations"]] == ["Report"]
    chat.import_chats(str(out))
    qtbot.waitUntil(lambda: chat.keeping.job is None, timeout=20000)
    assert "0 chats imported; 1 already here, skipped" in window.statusBar().currentMessage()


@pytest.mark.parametrize("question, files, title", [
    ("## Compare  the quarterly figures\n\nmore detail", "", "Compare the quarterly figures"),
    ("```python\nprint(1)\n```\nWhy does this print 1?", "", "Why does this print 1?"),
    ("```\nprint(1)\n```", "", "print(1)"),
    ("> quoted line\nnext", "", "quoted line"),
    ("", "plan.pdf", "plan.pdf"),
    ("???", "", "???"),
])
def test_a_new_chat_is_titled_from_its_question_at_once(question, files, title):
    from app.views.chat.format import chat_title

    assert chat_title(question, files) == title
