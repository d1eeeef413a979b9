"""The pictures a question was sent with, as thumbnails in one line of the transcript (each
scaled once per picture and kept as a resource of the transcript's document, by digest), the
name, pixels and size on hover. A picture the history no longer holds says so in its place."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QUrl, Qt
from PySide6.QtGui import (
    QColor, QGuiApplication, QImage, QPixmap, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument,
    QTextImageFormat,
)
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from engine.units import human_bytes

from ...history.pictures import image_refs  # noqa: F401  (the transcript reads a question's pictures with it)

from ..attachments.images import thumbnail

THUMB = 160  # logical pixels: a thumbnail fits in this square
MUTED = QColor(128, 128, 128)


def picture_row(cursor: QTextCursor, refs: list[tuple[str, str]], load: Callable[[str], bytes | None] | None, *,
                first: bool, ratio: float = 1.0, scheme: str = "msg") -> None:
    """Thumbnails of `refs` ((sha256, name) of each picture) in a block at `cursor`, each a link
    (`scheme`:picture:SHA256) that opens it whole; `load` gives a picture's bytes by digest;
    `ratio`: the screen's device pixel ratio (sharp on HiDPI)."""
    if not refs:
        return
    block = QTextBlockFormat()
    block.setTopMargin(2 if first else 6)
    if first:
        cursor.setBlockFormat(block)
    else:
        cursor.insertBlock(block, QTextCharFormat())
    doc = cursor.document()
    for i, (sha, name) in enumerate(refs):
        if i:
            cursor.insertText("  ", QTextCharFormat())
        url = QUrl(f"tandem:picture/{sha}")
        image = doc.resource(QTextDocument.ResourceType.ImageResource, url)
        if not isinstance(image, QImage):
            data = load(sha) if load is not None else None
            image = thumbnail(data, round(THUMB * ratio)) if data else QImage()
            if image.isNull():
                gone = QTextCharFormat()
                gone.setForeground(MUTED)
                cursor.insertText(f"[picture {name}: not in the history]", gone)
                continue
            image.setText("bytes", str(len(data or b"")))
            doc.addResource(QTextDocument.ResourceType.ImageResource, url, image)
        fmt = QTextImageFormat()
        fmt.setName(url.toString())
        fmt.setWidth(image.width() / ratio)
        fmt.setHeight(image.height() / ratio)
        size = image.text("bytes")
        fmt.setToolTip(f"{name}" + (f" · {human_bytes(int(size))}" if size.isdigit() else "")
                       + " · sent with this message; click to see it whole")
        fmt.setAnchor(True)
        fmt.setAnchorHref(f"{scheme}:picture:{sha}")
        cursor.insertImage(fmt)
    cursor.setCharFormat(QTextCharFormat())


class PictureViewer(QDialog):
    """A sent picture whole (scaled down to fit the screen), in a window of its own."""

    def __init__(self, data: bytes, name: str = "picture", parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(name)
        lay = QVBoxLayout(self)
        screen = (parent.screen() if parent is not None else None) or QGuiApplication.primaryScreen()
        room = screen.availableGeometry().size() * 0.8 if screen is not None else None
        image = QImage.fromData(data)
        if room is not None and (image.width() > room.width() or image.height() > room.height()):
            image = image.scaled(room, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
        self.label = QLabel()
        self.label.setPixmap(QPixmap.fromImage(image))
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(self.label)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)


def open_picture(parent: QWidget, sha: str, refs: list[tuple[str, str]], load: Callable[[str], bytes | None] | None) -> QDialog | None:
    """The viewer of picture `sha` (named as `refs` name it), shown; None when it is not stored."""
    data = load(sha) if load is not None else None
    if not data:
        return None
    viewer = PictureViewer(data, dict(refs).get(sha, "picture"), parent)
    viewer.show()
    return viewer
