"""Work is not lost by accident: Esc closes the dialog on top instead of stopping the answer,
and an edited question keeps its earlier branch (the old question and what followed it) as a
version, browsable like Regenerate's."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from test_gui_chat_input import window  # noqa: E402,F401  (the fixture: a window with the tiny pair loaded)


def _show_active(qtbot, window) -> None:
    """The window shown and active: its shortcuts answer keys only then."""
    window.show()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=60000)


def test_esc_closes_the_file_viewer_and_not_the_answer(qtbot, window, monkeypatch):  # noqa: F811
    from app.widgets.transcript.file_card import FileViewer

    chat = window.chat
    stops: list[int] = []
    monkeypatch.setattr(chat.stream, "stop", lambda: stops.append(1))  # what Esc would stop
    _show_active(qtbot, window)
    viewer = FileViewer("notes.txt", "text of the notes", parent=chat.transcript)
    viewer.show()
    qtbot.waitUntil(viewer.isVisible, timeout=60000)
    qtbot.keyClick(viewer.text, Qt.Key.Key_Escape)
    assert not viewer.isVisible(), "Esc closed the viewer"
    assert stops == [], "and did not stop the answer"
    chat.prompt.setFocus()
    qtbot.keyClick(chat.prompt, Qt.Key.Key_Escape)
    assert stops == [1], "with nothing open, Esc stops the answer"


def test_esc_in_the_window_closes_an_open_viewer_first(qtbot, window, monkeypatch):  # noqa: F811
    """The viewer is open but the key lands in the main window (the focus went back to it)."""
    from app.widgets.transcript.file_card import FileViewer

    chat = window.chat
    stops: list[int] = []
    monkeypatch.setattr(chat.stream, "stop", lambda: stops.append(1))
    _show_active(qtbot, window)
    viewer = FileViewer("notes.txt", "text", parent=chat.transcript)
    viewer.show()
    chat.prompt.setFocus()
    qtbot.keyClick(chat.prompt, Qt.Key.Key_Escape)
    assert not viewer.isVisible() and stops == []
    qtbot.keyClick(chat.prompt, Qt.Key.Key_Escape)
    assert stops == [1]


def _ask(qtbot, window, text: str) -> None:  # noqa: F811
    chat = window.chat
    chat.apply_settings({"drafter": "lookup", "lookahead": 3, "temperature": 0.0, "max_tokens": 6})
    chat.prompt.setPlainText(text)
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)


def _shown(window) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in window.history.messages(window.chat.conversation_id)]


def test_an_edit_keeps_the_earlier_question_and_its_answers_as_a_version(qtbot, window):  # noqa: F811
    from test_gui_transcript import click_anchor

    chat = window.chat
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    _ask(qtbot, window, "the value of")
    _ask(qtbot, window, "the data of")
    before = _shown(window)
    first = window.history.messages(chat.conversation_id)[0]
    click_anchor(qtbot, chat.transcript, f"msg:edit:{first.id}")
    chat.prompt.selectAll()
    qtbot.keyClicks(chat.prompt, "the class of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    edited = _shown(window)
    assert [r for r, _ in edited] == ["user", "assistant"] and edited[0][1] == "the class of" and edited[1][1]
    question = window.history.messages(chat.conversation_id)[0]
    assert (question.id, question.version, question.versions) == (first.id, 2, 2)
    assert "1/2" not in chat.transcript.toPlainText() and "2/2" in chat.transcript.toPlainText()
    click_anchor(qtbot, chat.transcript, f"msg:older:{first.id}")  # back to the first branch, whole
    assert _shown(window) == before
    assert "the data of" in chat.transcript.toPlainText() and "1/2" in chat.transcript.toPlainText()
    click_anchor(qtbot, chat.transcript, f"msg:newer:{first.id}")
    assert _shown(window) == edited


def test_branches_nest_and_switching_loses_nothing(tmp_path):
    """An edit inside a branch, answer versions in a tail: every switch restores them all."""
    from app.history import History
    from app.history.branches import choose_question, edit_question

    h = History(tmp_path / "h.db")
    cid = h.create("c").id
    q1 = h.add_message(cid, "user", "one", spans=[(3, "text")])
    a1 = h.add_message(cid, "assistant", "answer one", stats={"generated_tokens": 2})
    h.new_version(a1.id)
    h.update_message(a1.id, "answer one again", status="complete")
    q2 = h.add_message(cid, "user", "two")
    h.add_message(cid, "assistant", "answer two")
    edit_question(h, q2.id, "two edited", [(10, "text")])
    h.add_message(cid, "assistant", "answer two edited")
    branch_a = [(m.role, m.content, m.version, m.versions) for m in h.messages(cid)]
    edit_question(h, q1.id, "one edited", [])
    h.add_message(cid, "assistant", "answer one edited")
    branch_b = [(m.role, m.content, m.version, m.versions) for m in h.messages(cid)]
    assert branch_b == [("user", "one edited", 2, 2), ("assistant", "answer one edited", 1, 1)]
    choose_question(h, q1.id, 1)
    assert [(m.role, m.content, m.version, m.versions) for m in h.messages(cid)] == [("user", "one", 1, 2)] + branch_a[1:]
    assert branch_a[1:] == [("assistant", "answer one again", 2, 2), ("user", "two edited", 2, 2),
                            ("assistant", "answer two edited", 1, 1)]
    msgs = h.messages(cid)
    choose_question(h, msgs[2].id, 1)  # the nested edit's first version, under the restored branch
    assert [m.content for m in h.messages(cid)] == ["one", "answer one again", "two", "answer two"]
    h.choose_version(msgs[1].id, 1)  # the answer's versions came back too
    assert h.messages(cid)[1].content == "answer one"
    choose_question(h, q1.id, 2)
    assert [(m.role, m.content, m.version, m.versions) for m in h.messages(cid)] == branch_b
    h.close()
    again = History(tmp_path / "h.db")
    choose_question(again, q1.id, 1)
    assert [m.content for m in again.messages(cid)] == ["one", "answer one", "two", "answer two"], "kept on disk"
    again.close()
