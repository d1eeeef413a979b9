"""The side pane a Library source opens in: which file and where ("briefs/aurora.docx, page 2"),
the passage the answer was given, as it was when it was asked, and Open file / Close."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from ...history import source_place

MIN_WIDTH = 180  # beside the transcript at 1024 px with the chat list docked


class SourcePane(QWidget):
    openFile = Signal(dict)  # the source shown: open its file again
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
        self.passage = QTextBrowser()
        self.passage.setOpenLinks(False)
        row = QHBoxLayout()
        self.open_btn = QPushButton("Open file")
        self.open_btn.setToolTip("Open the file in the program your system opens it with")
        self.close_btn = QPushButton("Close")
        row.addWidget(self.open_btn)
        row.addStretch(1)
        row.addWidget(self.close_btn)
        lay.addWidget(self.title)
        lay.addWidget(self.note)
        lay.addWidget(self.passage, 1)
        lay.addLayout(row)
        self.open_btn.clicked.connect(lambda: self.source is not None and self.openFile.emit(self.source))
        self.close_btn.clicked.connect(self.hide)
        self.hide()

    def show_source(self, source: dict, note: str = "") -> None:
        """Show `source` (a stored Library source: n, file, page or section, text)."""
        self.source = source
        self.title.setText(f"<b>[{source.get('n', '?')}]</b> {_escape(source_place(source))}")
        self.title.setToolTip(str(source.get("folder", "")))
        self.passage.setPlainText(str(source.get("text", "")) or "(the passage was not kept with this answer)")
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.show()


    def setVisible(self, visible: bool) -> None:  # noqa: N802 - Qt's name
        changed = self.isHidden() == visible
        super().setVisible(visible)
        if changed:
            self.toggled.emit(visible)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
