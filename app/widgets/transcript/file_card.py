"""An attachment shown as a file card in the sent message (name, size, tokens; a click opens
it) instead of its whole text: the model still receives the text, the reader sees a file."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import (
    QColor, QFont, QFontMetrics, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument, QTextImageFormat,
)
from PySide6.QtWidgets import QApplication, QDialog, QDialogButtonBox, QPlainTextEdit, QStyle, QVBoxLayout, QWidget

from engine.units import human_bytes

CARD_BG = QColor(128, 128, 128, 36)
LINK = QColor(56, 132, 244)


NO_MODEL = "tokens: no model loaded"
FILE_ICON = QUrl("tandem:file-icon")  # the style's file icon, a resource of the transcript's document


def card_text(name: str, text: str, tokens: tuple[int, bool] | None = None) -> str:
    """"name · size · N tokens": tokens counted by the loaded model's tokenizer (`tokens` is
    (count, exact) from app.widgets.controls.token_meter.TokenCounter); without a model it says so
    instead of guessing."""
    size = human_bytes(len(text.encode("utf-8")))
    count = f"{tokens[0]:,} token{'s' if tokens[0] != 1 else ''}" if tokens is not None and tokens[1] else NO_MODEL
    return f"{name} · {size} · {count}"


def _insert_icon(cursor: QTextCursor, font: QFont) -> None:
    """The platform style's file icon, one line high. Not the 📄 emoji: without an emoji font
    (a plain Linux desktop, this machine) it was drawn as an empty box."""
    doc = cursor.document()
    side = QFontMetrics(font).height()
    if doc.resource(QTextDocument.ResourceType.ImageResource, FILE_ICON) is None:
        icon = QApplication.style().standardIcon(QStyle.StandardPixmap.SP_FileIcon)
        doc.addResource(QTextDocument.ResourceType.ImageResource, FILE_ICON, icon.pixmap(side * 2, side * 2).toImage())
    image = QTextImageFormat()
    image.setName(FILE_ICON.toString())
    image.setWidth(side)
    image.setHeight(side)
    image.setVerticalAlignment(QTextCharFormat.VerticalAlignment.AlignMiddle)
    cursor.insertImage(image)


def line_count(text: str) -> str:
    lines = text.count("\n") + 1 if text else 0
    return f"{lines:,} line{'s' if lines != 1 else ''}"


def file_card(cursor: QTextCursor, name: str, text: str, href: str, *, first: bool,
              tokens: tuple[int, bool] | None = None) -> None:
    """A card line at `cursor`: the file's name, size and tokens, then "Open" (a link to `href`)."""
    block = QTextBlockFormat()
    block.setBackground(CARD_BG)
    block.setTopMargin(2 if first else 4)
    block.setLeftMargin(2)
    if first:
        cursor.setBlockFormat(block)
    else:
        cursor.insertBlock(block, QTextCharFormat())
    bold = QTextCharFormat()
    bold.setFontWeight(QFont.Weight.DemiBold)
    exact = tokens is not None and tokens[1]
    bold.setToolTip(f"{name}: {line_count(text)}, {len(text):,} characters"
                    + ("; tokens counted with the loaded model's tokenizer" if exact
                       else "; load a model to count its tokens"))
    _insert_icon(cursor, cursor.document().defaultFont())
    cursor.insertText(" " + card_text(name, text, tokens) + "   ", bold)
    link = QTextCharFormat()
    link.setAnchor(True)
    link.setAnchorHref(href)
    link.setForeground(LINK)
    link.setFontUnderline(True)
    link.setToolTip(f"Show {name} as it was sent")
    cursor.insertText("Open", link)


class FileViewer(QDialog):
    """The attached file's text, read-only, in a monospace font."""

    def __init__(self, name: str, text: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(name)
        lay = QVBoxLayout(self)
        self.text = QPlainTextEdit(text)
        self.text.setReadOnly(True)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(mono)
        lay.addWidget(self.text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(640, 480)
