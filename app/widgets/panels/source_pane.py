"""The side pane a Library source opens in: which file and where ("briefs/aurora.pdf, page 2"),
the cited page itself when the source is a PDF's page (pdf_page_view.py, rendered off the GUI
thread), the passage the answer was given, as it was when it was asked, Open file and Open folder,
and a close button beside the title."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout, QLabel, QPushButton, QSplitter, QTextBrowser, QToolButton, QVBoxLayout, QWidget,
)

from ...history import source_place
from .pdf_page_view import PdfPageView

MIN_WIDTH = 180  # beside the transcript at 1024 px with the chat list docked
PAGE_SHARE = 3  # a PDF's page takes 3 parts of the pane's height to its passage's 1 (the user drags it)


def source_file(source: dict) -> Path | None:
    """Where a stored source's file is (its folder and its path in it), whether or not it is still there."""
    folder, file = source.get("folder"), source.get("file")
    return Path(str(folder)) / str(file) if folder and file else None


def pdf_page(source: dict) -> int | None:
    """The page a source cites when it is a PDF's page, else None."""
    page, path = source.get("page"), source_file(source)
    if isinstance(page, int) and page >= 1 and path is not None and path.suffix.lower() == ".pdf":
        return page
    return None


class SourcePane(QWidget):
    openFile = Signal(dict)  # the source shown: open its file again (at its page where the viewer can)
    openFolder = Signal(dict)  # the source shown: open the folder that holds its file
    toggled = Signal(bool)  # shown or hidden: the page makes room for it (or takes it back)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sourcePane")
        self.setMinimumWidth(MIN_WIDTH)
        self.source: dict | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 0, 0, 0)
        self.title = QLabel("")
        self.title.setWordWrap(True)
        self.note = QLabel("")  # the file is gone or changed since
        self.note.setWordWrap(True)
        self.note.setStyleSheet("font-style: italic;")
        self.note.hide()
        self.page = PdfPageView()
        self.page.hide()
        self.passage = QTextBrowser()
        self.passage.setOpenLinks(False)
        self.split = QSplitter(Qt.Orientation.Vertical)  # the page above, its passage's text below
        self.split.setChildrenCollapsible(False)
        self.split.addWidget(self.page)
        self.split.addWidget(self.passage)
        self.split.setStretchFactor(0, PAGE_SHARE)
        self.split.setStretchFactor(1, 1)
        row = QHBoxLayout()
        self.open_btn = QPushButton("Open file")
        self.open_btn.setToolTip("Open the file in the program your system opens it with (a PDF at the cited page "
                                 "where that program can)")
        self.folder_btn = QPushButton("Open folder")
        self.folder_btn.setToolTip("Show the folder that holds the file")
        self.close_btn = QToolButton()  # beside the title: the row below keeps the pane as narrow as before
        self.close_btn.setText("\u2715")
        self.close_btn.setAutoRaise(True)
        self.close_btn.setToolTip("Close the pane")
        self.close_btn.setAccessibleName("Close")
        row.addWidget(self.open_btn)
        row.addWidget(self.folder_btn)
        row.addStretch(1)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.close_btn, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(top)
        lay.addWidget(self.note)
        lay.addWidget(self.split, 1)
        lay.addLayout(row)
        self.open_btn.clicked.connect(lambda: self.source is not None and self.openFile.emit(self.source))
        self.folder_btn.clicked.connect(lambda: self.source is not None and self.openFolder.emit(self.source))
        self.close_btn.clicked.connect(self.hide)
        self.hide()

    def show_source(self, source: dict, note: str = "") -> None:
        """Show `source` (a stored Library source: n, file, page or section, text, folder); a
        PDF's page still in the folder is rendered beside its passage."""
        self.source = source
        self.title.setText(f"<b>[{source.get('n', '?')}]</b> {_escape(source_place(source))}")
        self.title.setToolTip(str(source.get("folder", "")))
        self.passage.setPlainText(str(source.get("text", "")) or "(the passage was not kept with this answer)")
        self.note.setText(note)
        self.note.setVisible(bool(note))
        page, path = pdf_page(source), source_file(source)
        self.show()
        if page is not None and path is not None and not note:
            self.page.show()
            self.split.setSizes([PAGE_SHARE * 1000, 1000])  # the page most of the height, its text below
            self.page.show_page(path, page)
        else:
            self.page.clear()
            self.page.hide()

    def setVisible(self, visible: bool) -> None:  # noqa: N802 - Qt's name
        changed = self.isHidden() == visible
        super().setVisible(visible)
        if changed:
            self.toggled.emit(visible)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
