"""A Library source that cites a PDF's page (issue #50: see the sources, open one): the side
pane shows that page, rendered off the GUI thread, beside the passage's text; a PDF that cannot
be rendered is one line there and the passage stays; Open file asks for the page
(`file:…#page=N`), the plain file where nothing opens that, and Open folder the folder."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pypdf")
pytest.importorskip("pypdfium2")

from PySide6.QtCore import QObject, QUrl, Signal  # noqa: E402
from PySide6.QtGui import QDesktopServices  # noqa: E402

from document_files import text_pdf  # noqa: E402

PAGES = ["Alpha", "Bravo bravo bravo bravo bravo bravo bravo", "Charlie charlie"]


@pytest.fixture
def pane(qtbot):
    from app.widgets.panels.source_pane import SourcePane

    p = SourcePane()
    qtbot.addWidget(p)
    p.resize(360, 700)
    return p


def _source(folder, page=2, file="report.pdf") -> dict:
    return {"n": 1, "file": file, "page": page, "folder": str(folder), "text": PAGES[page - 1], "score": 1.0}


def _ink(image) -> int:
    """Dark pixels in the picture (the page is white, its text black)."""
    from PySide6.QtGui import QImage

    gray = image.convertToFormat(QImage.Format.Format_Grayscale8)
    data = bytes(gray.constBits())
    return sum(1 for y in range(gray.height()) for b in data[y * gray.bytesPerLine():y * gray.bytesPerLine() + gray.width()]
               if b < 128)


def test_a_source_with_a_page_shows_that_page_beside_its_passage(qtbot, pane, tmp_path):
    from engine.documents.pdf_page import render_page

    text_pdf(tmp_path / "report.pdf", PAGES)
    pane.show_source(_source(tmp_path))
    assert pane.isVisibleTo(pane.parentWidget() or pane) and pane.page.isVisibleTo(pane)
    assert pane.passage.toPlainText() == PAGES[1]  # the text stays, selectable
    qtbot.waitUntil(lambda: pane.page.picture is not None, timeout=20000)
    picture = pane.page.picture
    assert pane.page.line.text() == "Page 2 of 3" and picture.width() >= 360
    assert _ink(picture) > 0 and pane.page.image.pixmap() is not None and not pane.page.image.pixmap().isNull()
    # the right page: PDFium's own render of page 2 at that width, not page 1's or page 3's
    mine = bytes(picture.constBits())[:picture.bytesPerLine() * picture.height()]
    for n in (1, 2, 3):
        page = render_page(tmp_path / "report.pdf", n, picture.width())
        rows = b"".join(page.rgb[y * page.stride:y * page.stride + 3 * page.width] for y in range(page.height))
        shown = b"".join(mine[y * picture.bytesPerLine():y * picture.bytesPerLine() + 3 * picture.width()]
                         for y in range(picture.height()))
        assert (rows == shown) is (n == 2), f"page {n}"
    # another source that is not a PDF's page: no page shown, nothing left of the last one
    pane.show_source({"n": 2, "file": "notes.md", "section": "Budget", "folder": str(tmp_path), "text": "5 EUR"})
    assert not pane.page.isVisibleTo(pane) and pane.page.picture is None


def test_a_pdf_that_cannot_be_rendered_is_one_line_and_the_passage_stays(qtbot, pane, tmp_path, caplog):
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4 this is not a PDF")
    caplog.set_level(logging.WARNING)
    shown: list[bool] = []
    pane.page.shown.connect(shown.append)
    pane.show_source(_source(tmp_path))
    qtbot.waitUntil(lambda: shown == [False], timeout=20000)
    line = pane.page.line.text()
    assert line.startswith("The page cannot be shown: report.pdf: not a PDF PDFium can show") and "\n" not in line
    assert pane.page.picture is None and pane.passage.toPlainText() == PAGES[1]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # no traceback logged


def test_an_older_render_never_replaces_the_page_asked_for_since(qtbot, pane, tmp_path):
    text_pdf(tmp_path / "report.pdf", PAGES)
    shown: list[bool] = []
    pane.page.shown.connect(shown.append)
    pane.show_source(_source(tmp_path, page=1))
    pane.show_source(_source(tmp_path, page=3))
    qtbot.waitUntil(lambda: pane.page.picture is not None, timeout=20000)
    qtbot.wait(300)  # the first render's result too, had it been kept
    assert pane.page.line.text() == "Page 3 of 3" and shown == [True]


def test_a_pane_widened_renders_the_page_again_at_its_width(qtbot, pane, tmp_path):
    text_pdf(tmp_path / "report.pdf", PAGES)
    pane.show()
    pane.show_source(_source(tmp_path))
    qtbot.waitUntil(lambda: pane.page.picture is not None, timeout=20000)
    first = pane.page.picture.width()
    pane.resize(1400, 700)
    qtbot.waitUntil(lambda: pane.page.picture.width() > first * 2, timeout=20000)
    assert pane.page.picture.width() <= 1400 * pane.devicePixelRatioF() and pane.page.line.text() == "Page 2 of 3"


class _Transcript(QObject):
    sourceClicked = Signal(int, int)

    def message(self, _id):
        return None


def test_open_file_asks_for_the_page_and_open_folder_for_the_folder(qtbot, pane, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QComboBox

    from app.views.chat.library_ask import LibraryAsk

    text_pdf(tmp_path / "report.pdf", PAGES)
    notices: list[str] = []
    ask = LibraryAsk(None, QComboBox(), pane, _Transcript(), notices.append, notices.append)
    opened: list[QUrl] = []
    answers = [True]
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(QUrl(url)) or answers.pop(0))
    pane.show_source(_source(tmp_path))
    pane.open_btn.click()
    assert [(u.toLocalFile(), u.fragment()) for u in opened] == [(str(tmp_path / "report.pdf"), "page=2")]
    assert opened[0].toString().startswith("file://") and opened[0].toString().endswith("report.pdf#page=2")
    assert "at page 2" in notices[-1]
    # nothing opens the URL with its page: the file itself, and the notice says which page
    opened.clear()
    answers[:] = [False, True]
    pane.open_btn.click()
    assert [u.fragment() for u in opened] == ["page=2", ""] and opened[1].toLocalFile() == str(tmp_path / "report.pdf")
    assert "go to page 2" in notices[-1]
    opened.clear()
    answers[:] = [True]
    pane.folder_btn.click()
    assert [u.toLocalFile() for u in opened] == [str(tmp_path)] and ask is not None
