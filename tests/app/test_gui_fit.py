"""Issue 26's small clips, measured (text width against the room a widget draws it in) at
800, 1024 and 1360 px: the rename field, the status bar's load progress, the Draft box."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QComboBox, QInputDialog, QLineEdit  # noqa: E402

from layout_checks import clipped_fields, line_edit_fits  # noqa: E402
from test_gui_chat_input import _load, _make_window  # noqa: E402

WIDTHS = [(800, 700), (1024, 700), (1360, 860)]
LONG_DRAFT = "qwen2.5-coder-0.5b-instruct-q8_0.gguf"


def _settle(qtbot) -> None:
    for _ in range(4):
        QApplication.processEvents()
    qtbot.wait(10)


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    """A window with a pair whose draft has a long file name (as the default pair's has)."""
    draft = tmp_path / LONG_DRAFT
    shutil.copyfile(tiny_target, draft)
    w = _make_window(qtbot, tmp_path, monkeypatch)
    w.show()
    qtbot.waitExposed(w)
    _load(qtbot, w, tiny_target, draft)
    yield w
    w.close()


def test_the_draft_box_shortens_its_choice_with_an_ellipsis_and_names_it_whole_on_hover(qtbot, window):
    draft = window.chat.model_bar.draft
    whole = f"Draft: {LONG_DRAFT.removesuffix('.gguf')}"
    assert draft.currentText() == whole
    for size in WIDTHS:
        window.resize(*size)
        _settle(qtbot)
        assert clipped_fields(window) == [], size
        if draft.is_elided():
            shown = draft.shown_text()
            assert shown.endswith("…") and whole.startswith(shown[:-1])
            assert draft.toolTip().startswith(whole + "\n"), "the whole choice on hover"
            assert draft.fontMetrics().horizontalAdvance(shown) <= draft.text_room()
        else:
            assert draft.toolTip().startswith("How answers are drafted")
    window.resize(800, 700)
    _settle(qtbot)
    assert draft.is_elided(), "at 800 px the long draft name does not fit whole"
    plain = QComboBox(draft.parentWidget())  # the check fails on a box that cuts the same text off
    plain.addItem(whole)
    plain.setGeometry(draft.geometry())
    plain.show()
    _settle(qtbot)
    assert any("QComboBox" in p and whole in p for p in clipped_fields(window))
    plain.deleteLater()


def test_the_load_progress_text_fits_its_bar_at_every_width(qtbot, window):
    for size in WIDTHS:
        window.resize(*size)
        window._load_progress("target", 0.45)
        _settle(qtbot)
        bar = window.load_bar
        assert bar.isVisible() and bar.text() == "loading target 45%"
        assert clipped_fields(window) == [], size
    window._load_progress(f"draft {LONG_DRAFT} and more words of a long pair title", 0.5)
    _settle(qtbot)
    assert clipped_fields(window) == [] and bar.text().endswith("50%") and "…" in bar.text()
    assert LONG_DRAFT in bar.toolTip()
    bar.setFixedWidth(120)  # what the bar was: 160 px at most; the check says it cuts the text
    bar.setFormat("loading qwen2.5-coder-1.5b-instruct target %p%")
    _settle(qtbot)
    assert clipped_fields(window) != []


def test_the_rename_field_shows_a_long_title_whole(qtbot, window):
    chat = window.chat
    title = "Rust borrow checker questions about lifetimes in async code"
    c = chat.history.create(title)
    chat.history.add_message(c.id, "user", "why")
    chat.refresh_conversations()
    chat.open_conversation(c.id)
    for size in WIDTHS:
        window.resize(*size)
        _settle(qtbot)
        seen: list = []

        def look_and_type() -> None:
            d = QApplication.activeModalWidget()
            assert isinstance(d, QInputDialog)
            edit = d.findChild(QLineEdit)
            seen.append((edit.text(), line_edit_fits(edit), d.width() <= window.width()))
            edit.setText(f"{title} ({size[0]})")
            qtbot.keyClick(edit, Qt.Key.Key_Return)

        QTimer.singleShot(50, look_and_type)
        more = chat.more_btn.menu()
        more.aboutToShow.emit()  # as opening it does: the actions are for the chat open now
        next(a for a in more.actions() if a.text() == "Rename…").trigger()  # More → Rename…
        assert seen == [(seen[0][0], None, True)] and seen[0][0].startswith(title), size
        assert chat.history.get(c.id).title == f"{title} ({size[0]})"
        title = chat.history.get(c.id).title
    plain = QInputDialog(window)  # the check fails on Qt's default field (what Rename had)
    plain.setTextValue(title)
    plain.show()
    _settle(qtbot)
    assert line_edit_fits(plain.findChild(QLineEdit)) is not None
    plain.reject()
