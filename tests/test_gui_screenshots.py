"""Screenshot checks at the two window sizes people use (1024×700, half of a small screen;
1440×900): render each page offscreen to a PNG and check the geometry a person would see —
no button narrower than its text, no page scrolling sideways, nothing wider than the window.
The PNGs land in the test's temporary folder (kept by pytest for a look after a failure)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QSettings  # noqa: E402
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
