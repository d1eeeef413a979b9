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
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)


def test_esc_closes_the_file_viewer_and_not_the_answer(qtbot, window, monkeypatch):  # noqa: F811
    from app.widgets.file_card import FileViewer

    chat = window.chat
    stops: list[int] = []
    monkeypatch.setattr(chat.stream, "stop", lambda: stops.append(1))  # what Esc would stop
    _show_active(qtbot, window)
    viewer = FileViewer("notes.txt", "text of the notes", parent=chat.transcript)
    viewer.show()
    qtbot.waitUntil(viewer.isVisible, timeout=5000)
    qtbot.keyClick(viewer.text, Qt.Key.Key_Escape)
    assert not viewer.isVisible(), "Esc closed the viewer"
    assert stops == [], "and did not stop the answer"
    chat.prompt.setFocus()
    qtbot.keyClick(chat.prompt, Qt.Key.Key_Escape)
    assert stops == [1], "with nothing open, Esc stops the answer"


def test_esc_in_the_window_closes_an_open_viewer_first(qtbot, window, monkeypatch):  # noqa: F811
    """The viewer is open but the key lands in the main window (the focus went back to it)."""
    from app.widgets.file_card import FileViewer

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
