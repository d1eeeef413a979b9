"""Screenshot checks at the two window sizes people use (1024×700, half of a small screen;
1440×900): render each page offscreen to a PNG and check the geometry a person would see —
no button narrower than its text, no page scrolling sideways, nothing wider than the window.
The PNGs land in the test's temporary folder (kept by pytest for a look after a failure)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QPoint, QRect, QSettings, Qt  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QMessageBox, QWidget  # noqa: E402

from app.history import History  # noqa: E402

SIZES = [(1024, 700), (1440, 900)]


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    from app.main_window import MainWindow

    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: QMessageBox.StandardButton.Ok)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    w.session.load(tiny_target, tiny_target, label="tiny target + tiny target as its own draft, a long pair title")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=20000)
    chat = w.chat
    chat.apply_settings({"drafter": "model", "lookahead": 4, "max_tokens": 60, "temperature": 0.0})
    chat.prompt.setPlainText("the value of")
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    yield w
    w.close()


def clipped(w: QWidget) -> list[str]:
    """Visible buttons and one-line labels narrower than their size hint (text cut off) or
    sticking out of the panel that holds them (cut off by its edge)."""
    out = []
    for c in w.findChildren(QWidget):
        if not c.isVisibleTo(w) or c.window() is not w or c.width() <= 0:
            continue
        elided = hasattr(c, "is_elided")  # an ElidedLabel shortens itself and keeps a tooltip
        if isinstance(c, QAbstractButton) or (isinstance(c, QLabel) and not c.wordWrap() and not elided
                                              and c.text() and not c.pixmap()):
            if c.width() < c.sizeHint().width() - 1:
                out.append(f"{type(c).__name__} {c.text()[:30]!r}: {c.width()} < {c.sizeHint().width()}")
            parent = c.parentWidget()
            if parent is not None and not parent.rect().contains(c.geometry()):
                out.append(f"{type(c).__name__} {c.text()[:30]!r} sticks out of its panel")
    return out


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_page_fits_at(qtbot, window, tmp_path, size):
    w = window
    w.resize(*size)
    for page, name in enumerate(w.views):
        w.nav.setCurrentRow(page)
        for _ in range(5):
            QApplication.processEvents()
        qtbot.wait(30)
        assert (w.width(), w.height()) == size, f"{name} resized the window"
        png = tmp_path / f"{name.lower()}-{size[0]}x{size[1]}.png"
        assert w.grab().save(str(png))
        img = QImage(str(png))
        assert (img.width(), img.height()) == (w.width() * img.devicePixelRatio(), w.height() * img.devicePixelRatio())
        area = w.stack.currentWidget()
        assert area.widget().width() <= area.viewport().width(), f"{name} scrolls sideways at {size}"
        if name in ("Chat", "Race", "Settings"):  # the pages this shell lays out
            assert clipped(w) == [], f"{name} at {size}"
        for c in w.centralWidget().findChildren(QWidget):
            if c.isVisibleTo(w) and c.window() is w:
                assert c.width() <= w.width(), f"{type(c).__name__} is wider than the window"
    assert w.minimumSizeHint().width() <= 820


# -- issue 26: the three widths people use, both themes, measured ------------------------------------
WIDTHS = [(800, 600), (1024, 700), (1360, 860)]
PAGES = ["Chat", "Race", "Models", "Bench", "Settings", "Library"]


@pytest.fixture
def raced(window, qtbot):
    """The window after a chat answer (the fixture) and a race, so the Race page shows its verdict."""
    race = window.views["Race"]
    race.drafter.setCurrentIndex(race.drafter.findData("lookup"))
    race.max_tokens.setValue(24)
    race.prompt.setPlainText("the value of the value of")
    race.start()
    qtbot.waitUntil(lambda: race.result is not None and race.worker is None, timeout=60000)
    race.stop_replay()
    # the longest headline wording engine.measure.racing writes, to check that it wraps whole
    race.speedup_label.setText("1.38× slower (wall clock, prompt in to last token out)")
    yield window
    from app import appearance

    appearance.apply(QApplication.instance(), "system")


def _look(qtbot, w, tmp_path, name: str, size, theme: str, problems) -> list[str]:
    from layout_checks import settled_problems

    for _ in range(6):
        QApplication.processEvents()
    qtbot.wait(20)
    assert w.grab().save(str(tmp_path / f"{name.lower()}-{size[0]}x{size[1]}-{theme}.png"))
    return [f"{name} {size[0]}x{size[1]} {theme}: {p}" for p in settled_problems(qtbot, w, problems)]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_page_reflows_at_three_widths(qtbot, raced, tmp_path, theme):
    """No horizontal scrollbar, no text cut off, every control inside the window, the race's
    verdict and the models' Fit column in sight, at 800x600, 1024 and 1360 px, light and dark;
    the chat also with its settings drawer opened (F9)."""
    from layout_checks import page_problems, problems

    w = raced
    w.set_theme(theme)
    found: list[str] = []
    for size in WIDTHS:
        w.resize(*size)
        for page, name in enumerate(PAGES):
            w.nav.setCurrentRow(page)
            found += _look(qtbot, w, tmp_path, name, size, theme, lambda w, name=name: page_problems(w, name))
            assert (w.width(), w.height()) == size, f"{name} resized the window"
        w.nav.setCurrentRow(0)
        for opened in (True, False):  # F9 opens the drawer over (or beside) the transcript, then closes it
            qtbot.keyClick(w.chat, Qt.Key.Key_F9)
            found += _look(qtbot, w, tmp_path, f"Chat-drawer-{'open' if opened else 'closed'}", size, theme, problems)
            assert w.chat.drawer_open is opened
            if opened:
                assert w.chat.temperature.isVisibleTo(w) and w.chat.charts.isVisibleTo(w)
                assert w.chat.send_btn.isVisibleTo(w), "the drawer hides Send"
    assert found == []


def test_a_narrow_window_floats_the_conversation_list_and_the_drawer(qtbot, raced):
    """At 800 px the chat keeps its transcript: the conversation list opens from "Chats" over
    it and closes when a chat is picked; the settings drawer floats beside its toggle."""
    w = raced
    w.resize(800, 700)
    w.nav.setCurrentRow(0)
    qtbot.wait(50)
    chat = w.chat
    assert chat.chats_btn.isVisibleTo(w) and not chat.conv_list.isVisibleTo(w)
    qtbot.mouseClick(chat.chats_btn, Qt.MouseButton.LeftButton)
    qtbot.wait(20)
    assert chat.conv_list.isVisibleTo(w) and chat.conv_list.count() == 1
    sheet = chat.sides.chats_overlay.sheet
    assert w.rect().contains(QRect(sheet.mapTo(w, QPoint(0, 0)), sheet.size())), "the list floats inside the window"
    item = chat.conv_list.item(0)
    chat.new_conversation()
    qtbot.mouseClick(chat.chats_btn, Qt.MouseButton.LeftButton)
    rect = chat.conv_list.visualItemRect(item)
    qtbot.mouseClick(chat.conv_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.wait(20)
    assert chat.conversation_id is not None and not chat.conv_list.isVisibleTo(w), "picking a chat closes the list"
    qtbot.keyClick(chat, Qt.Key.Key_F9)
    qtbot.wait(20)
    assert chat.drawer_open and chat.transcript.width() > 400, "the drawer floats instead of squeezing the transcript"
    w.resize(1360, 860)
    qtbot.wait(50)
    assert not chat.chats_btn.isVisibleTo(w) and chat.conv_list.isVisibleTo(w), "a wide window docks the list again"
