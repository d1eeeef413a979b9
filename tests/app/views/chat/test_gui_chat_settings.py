"""Each chat keeps its generation settings and system prompt: switching chats brings each
one's back, and so does a restart."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from test_gui_chat_input import _load, _make_window  # noqa: E402


def _chat_with(qtbot, w, text: str, **settings) -> int:
    chat = w.chat
    chat.new_conversation()
    chat.apply_settings({"drafter": "lookup", "lookahead": 3, "seed": -1, **settings})
    chat.prompt.setPlainText(text)
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None and chat.conversation_id is not None, timeout=30000)
    return chat.conversation_id


def _controls(chat) -> tuple:
    return (chat.temperature.value(), chat.top_p.value(), chat.max_tokens.value(), chat.system.toPlainText(),
            chat.lookahead.value())


def test_each_chat_keeps_its_settings_across_switches_and_a_restart(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, None)
    report = _chat_with(qtbot, w, "the value of", temperature=0.7, top_p=0.9, max_tokens=5, system="Report writer")
    review = _chat_with(qtbot, w, "the data of", temperature=0.0, top_p=1.0, max_tokens=3, system="Code reviewer",
                        lookahead="auto")
    chat = w.chat
    assert _controls(chat) == (0.0, 1.0, 3, "Code reviewer", "auto")
    chat.open_conversation(report)
    assert _controls(chat) == (0.7, 0.9, 5, "Report writer", 3)
    chat.open_conversation(review)
    assert _controls(chat) == (0.0, 1.0, 3, "Code reviewer", "auto")
    w.history.close()
    w.close()
    again = _make_window(qtbot, tmp_path, monkeypatch)
    again.chat.open_conversation(report)
    assert _controls(again.chat) == (0.7, 0.9, 5, "Report writer", 3), "kept in the history database"
    again.close()


def test_presets_set_the_content_settings_and_the_users_own_are_kept(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    from app.presets import BUILT_IN, load_presets, presets_file

    w = _make_window(qtbot, tmp_path, monkeypatch)
    chat, panel = w.chat, w.chat.settings_panel
    names = [panel.preset.itemText(i) for i in range(panel.preset.count())]
    assert "Report writer" in names and "Code reviewer" in names
    chat.apply_settings({"drafter": "lookup", "lookahead": 5, "temperature": 1.2, "max_tokens": 9, "system": ""})
    panel.preset.activated.emit(names.index("Code reviewer"))  # what choosing it in the box does
    reviewer = BUILT_IN["Code reviewer"]
    assert (chat.temperature.value(), chat.max_tokens.value(), chat.system.toPlainText()) == \
        (reviewer["temperature"], reviewer["max_tokens"], reviewer["system"])
    assert chat.lookahead.value() == 5, "a preset leaves drafting as it is"
    chat.apply_settings({**chat.settings(), "temperature": 0.4, "max_tokens": 77, "system": "Terse memos"})
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Memo", True))
    qtbot.mouseClick(panel.save_preset_btn, Qt.MouseButton.LeftButton)
    assert presets_file().is_file()
    chat.apply_settings({**chat.settings(), "temperature": 0.0, "max_tokens": 5, "system": ""})
    w.close()
    again = _make_window(qtbot, tmp_path, monkeypatch)
    box = again.chat.settings_panel.preset
    memo = [box.itemText(i) for i in range(box.count())].index("Memo")
    box.activated.emit(memo)
    assert (again.chat.temperature.value(), again.chat.max_tokens.value(), again.chat.system.toPlainText()) == \
        (0.4, 77, "Terse memos")
    again.close()
    presets_file().write_text("not json")
    assert "Report writer" in load_presets(), "a damaged file keeps the built-in ones"
