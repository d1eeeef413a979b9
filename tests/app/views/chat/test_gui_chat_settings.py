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
    v = chat.settings()
    return (v["temperature"], v["top_p"], v["max_tokens"], v["system"], v["lookahead"], v["top_k"], v["min_p"],
            v["repeat_penalty"], v["stop"], v["seed"])


def test_each_chat_keeps_its_settings_across_switches_and_a_restart(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, None)
    report = _chat_with(qtbot, w, "the value of", temperature=0.7, top_p=0.9, max_tokens=5, system="Report writer",
                        top_k=40, min_p=0.05, repeat_penalty=1.15, stop=["\n\n", "Q:"], seed=2**63)
    review = _chat_with(qtbot, w, "the data of", temperature=0.0, top_p=1.0, max_tokens=3, system="Code reviewer",
                        lookahead="auto")
    chat = w.chat
    reviewed = (0.0, 1.0, 3, "Code reviewer", "auto", 0, 0.0, 1.0, [], None)
    reported = (0.7, 0.9, 5, "Report writer", 3, 40, 0.05, 1.15, ["\n\n", "Q:"], 2**63)
    assert _controls(chat) == reviewed
    chat.open_conversation(report)
    assert _controls(chat) == reported
    chat.open_conversation(review)
    assert _controls(chat) == reviewed
    w.history.close()
    w.close()
    again = _make_window(qtbot, tmp_path, monkeypatch)
    again.chat.open_conversation(report)
    assert _controls(again.chat) == reported, "kept in the history database"
    again.close()


def test_presets_set_the_content_settings_and_the_users_own_are_kept(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    from app.presets import BUILT_IN, load_presets, presets_file

    w = _make_window(qtbot, tmp_path, monkeypatch)
    chat, panel = w.chat, w.chat.settings_panel
    names = [panel.preset.itemText(i) for i in range(panel.preset.count())]
    assert "Report writer" in names and "Code reviewer" in names
    chat.apply_settings({"drafter": "lookup", "lookahead": 5, "temperature": 1.2, "max_tokens": 9, "system": "",
                         "top_k": 7, "stop": ["END"], "seed": 3})
    panel.preset.activated.emit(names.index("Code reviewer"))  # what choosing it in the box does
    reviewer = BUILT_IN["Code reviewer"]
    assert (chat.temperature.value(), chat.max_tokens.value(), chat.system.toPlainText()) == \
        (reviewer["temperature"], reviewer["max_tokens"], reviewer["system"])
    assert chat.lookahead.value() == 5, "a preset leaves drafting as it is"
    assert (chat.settings()["top_k"], chat.settings()["stop"], chat.settings()["seed"]) == (0, [], None), \
        "what a preset does not name takes its default, not the chat's last value"
    memo = {"temperature": 0.4, "max_tokens": 77, "system": "Terse memos", "top_k": 50, "top_p": 0.85,
            "min_p": 0.1, "repeat_penalty": 1.2, "stop": ["\nUser:"], "seed": 11}
    chat.apply_settings({**chat.settings(), **memo})
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Memo", True))
    qtbot.mouseClick(panel.save_preset_btn, Qt.MouseButton.LeftButton)
    assert presets_file().is_file()
    chat.settings_panel.reset_sampling()
    chat.apply_settings({**chat.settings(), "system": ""})
    w.close()
    again = _make_window(qtbot, tmp_path, monkeypatch)
    box = again.chat.settings_panel.preset
    box.activated.emit([box.itemText(i) for i in range(box.count())].index("Memo"))
    assert {k: again.chat.settings()[k] for k in memo} == memo
    again.close()
    presets_file().write_text("not json")
    assert "Report writer" in load_presets(), "a damaged file keeps the built-in ones"
