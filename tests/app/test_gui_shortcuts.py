"""The chat's keyboard shortcuts do what the links and buttons do (Regenerate, Continue, Copy
answer, Attach, Export, Search), Help lists them, the dark theme shows where the focus is, and
a search that matches nothing says so."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog  # noqa: E402

from test_gui_chat_input import window  # noqa: E402,F401  (the fixture: a window with the tiny pair loaded)
from test_gui_feedback import _best_contrast  # noqa: E402


def _active(qtbot, window) -> None:  # noqa: F811
    window.show()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=60000)


def test_shortcuts_regenerate_continue_copy_attach_export_and_search(qtbot, window, monkeypatch):  # noqa: F811
    from app.help_menu import collect_shortcuts

    chat = window.chat
    _active(qtbot, window)
    chat.apply_settings({"drafter": "lookup", "lookahead": 3, "temperature": 0.0, "max_tokens": 4})
    chat.prompt.setPlainText("the value of")
    qtbot.keyClick(chat.prompt, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: chat.worker is None and chat.conversation_id is not None, timeout=30000)
    answer = window.history.messages(chat.conversation_id)[-1]
    assert answer.stats.get("finish_reason") == "length"

    qtbot.keyClick(chat.prompt, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: chat.worker is None and window.history.messages(chat.conversation_id)[-1].status
                    != "generating", timeout=30000)
    longer = window.history.messages(chat.conversation_id)[-1]
    assert longer.id == answer.id and len(longer.content) > len(answer.content), "Ctrl+Shift+Enter continued it"

    qtbot.keyClick(chat.prompt, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: chat.worker is None and window.history.messages(chat.conversation_id)[-1].versions == 2,
                    timeout=30000)

    QGuiApplication.clipboard().clear()
    qtbot.keyClick(chat.prompt, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    last = window.history.messages(chat.conversation_id)[-1]
    assert QGuiApplication.clipboard().text().strip() == last.content.strip()

    asked: list[int] = []
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: asked.append(1) or ([], ""))
    qtbot.keyClick(chat.prompt, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)
    assert asked == [1], "Ctrl+O opens the Attach dialog"
    menus: list[int] = []
    monkeypatch.setattr(chat.export_btn, "showMenu", lambda: menus.append(1))
    qtbot.keyClick(chat.prompt, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert menus == [1], "Ctrl+E opens the export menu"
    qtbot.keyClick(chat.prompt, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert chat.search.hasFocus()

    listed = {s.keys: s.what for s in collect_shortcuts(window)}
    for keys in ("Ctrl+R", "Ctrl+Shift+Return", "Ctrl+Shift+C", "Ctrl+O", "Ctrl+E", "Ctrl+F"):
        assert listed.get(keys), f"Help lists {keys}"


def test_a_search_that_matches_nothing_says_so(qtbot, window):  # noqa: F811
    chat = window.chat
    window.history.create("Budget report")
    chat.refresh_conversations()
    qtbot.keyClicks(chat.search, "zebra")
    assert chat.conv_list.count() == 1
    note = chat.conv_list.item(0)
    assert note.text() == "No conversation matches “zebra”" and note.flags() == Qt.ItemFlag.NoItemFlags
    chat.conv_list.setCurrentRow(0)  # not a conversation: nothing opens, nothing breaks
    assert chat.conversation_id is None
    chat.search.clear()
    assert chat.conv_list.item(0).text().startswith("Budget report")


def test_dark_theme_shows_where_the_keyboard_focus_is(qtbot, window):  # noqa: F811
    """A visible focus ring on the dark palette (WCAG 3:1 against the window): Fusion drew it
    in a shade of the dark green highlight, which all but vanished."""
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    from app import appearance

    window.set_theme("dark")
    try:
        bg = QApplication.instance().palette().color(QPalette.ColorRole.Window)
        window.show()
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=60000)
        for widget in (window.chat.send_btn, window.chat.search):
            widget.setFocus(Qt.FocusReason.TabFocusReason)
            qtbot.waitUntil(widget.hasFocus, timeout=60000)
            w, h = widget.width(), widget.height()
            edges = [QRect(0, 0, w, 3), QRect(0, h - 3, w, 3)]
            assert min(_best_contrast(widget, r, bg) for r in edges) >= 3.0, f"{type(widget).__name__}: focus visible"
    finally:
        appearance.apply(QApplication.instance(), "system")
