"""Pictures attached to a prompt, for a model that sees: the ways one arrives (a PNG, JPEG or
WebP file attached or dropped, an image pasted or dropped from another program: a screenshot
on the clipboard) and its chip, a thumbnail with the name, pixels and size.

A picture is checked when it arrives, by the bounds the engine holds a request's pictures to
(engine/documents/images.py: bytes, format by signature, pixels from the header), so a
refusal is one line at attach time, never at Send. The bytes go to the engine as they came:
a pasted screenshot is kept in the format the clipboard offered (PNG when it offers only
pixels), and named by its sha256, which is how the history keeps it once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, QSize, Qt
from PySide6.QtGui import QImage, QImageReader, QPixmap
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton

from engine.documents.images import FORMATS, MAX_IMAGE_BYTES, ImageError, ImageInput, image_format, image_size
from engine.units import human_bytes

from ..controls.elided_label import ElidedLabel

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
IMAGE_FILTER = "Pictures, for a model that sees (*.png *.jpg *.jpeg *.webp)"
CHIP_THUMB = 28  # pixels: the chip's thumbnail fits in this square (about two lines of text)
_MIME_FORMATS = ("image/png", "image/jpeg", "image/webp")  # taken as sent, before the clipboard's pixels


@dataclass(frozen=True)
class ImageAttachment:
    """A checked picture waiting to be sent: its bytes as they came, named by sha256."""

    name: str
    data: bytes = field(repr=False)
    width: int
    height: int
    sha256: str = ""

    def __post_init__(self) -> None:
        if not self.sha256:
            object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())

    @property
    def format(self) -> str:
        return image_format(self.data)

    @property
    def label(self) -> str:
        """"1280 × 720": what the chip says after the name (its bytes are in the tooltip)."""
        return f"{self.width} × {self.height}"

    def input(self) -> ImageInput:
        """The picture as an engine request carries it."""
        return ImageInput(self.data, self.sha256, self.name)


def image_attachment(data: bytes, name: str) -> ImageAttachment:
    """The picture `data` once its bytes, format and pixels are within the engine's bounds;
    ImageError in one line naming it otherwise. Nothing is decoded beyond the header."""
    w, h = image_size(ImageInput(data, name=name))
    return ImageAttachment(name, bytes(data), w, h)


def read_image_file(path: str | Path) -> ImageAttachment:
    """The picture in the file at `path`, its size checked before it is read; ImageError."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_IMAGE_BYTES:
            raise ImageError(f"{p.name} is {size / 1e6:.1f} MB; images are limited to {MAX_IMAGE_BYTES / 1e6:.0f} MB")
        data = p.read_bytes()
    except OSError as e:
        raise ImageError(f"{p.name}: cannot read it ({e.strerror or e})") from None
    return image_attachment(data, p.name)


def is_image_file(path: str | Path) -> bool:
    """A file the chat takes as a picture (by its suffix or its first bytes), not a document:
    other picture formats (GIF, BMP, TIFF) come here too, to be refused as pictures in one line."""
    p = Path(path)
    if p.suffix.lower() in IMAGE_SUFFIXES:
        return True
    try:
        with open(p, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    return image_format(head) not in ("", "PDF")


def mime_images(mime: QMimeData | None) -> list[tuple[str, bytes]]:
    """(name, bytes) of the picture a paste or a drop from another program carries (a screenshot,
    an image copied in a browser): its own PNG/JPEG/WebP bytes when offered, else its pixels as
    PNG. [] when it carries none (local files come as paths instead: `local_files`)."""
    if mime is None:
        return []
    for kind in _MIME_FORMATS:
        if mime.hasFormat(kind):
            data = bytes(mime.data(kind).data())
            if image_format(data) in FORMATS:
                return [(f"pasted image.{kind.split('/')[1].replace('jpeg', 'jpg')}", data)]
    if not mime.hasImage():
        return []
    image = mime.imageData()
    if not isinstance(image, QImage):
        image = QImage(image) if image is not None else QImage()
    if image.isNull():
        return []
    out = QByteArray()
    buf = QBuffer(out)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buf, "PNG")
    buf.close()
    return [("pasted image.png", bytes(out.data()))]


def has_image(mime: QMimeData | None) -> bool:
    """A paste or drop that carries a picture (not a file path)."""
    return mime is not None and (mime.hasImage() or any(mime.hasFormat(k) for k in _MIME_FORMATS))


def thumbnail(data: bytes, side: int) -> QImage:
    """The picture scaled to fit a `side` x `side` square (a null QImage when Qt cannot read it);
    decoded scaled where the format allows (JPEG), never shown larger than it is."""
    buf = QBuffer()
    buf.setData(QByteArray(data))
    buf.open(QIODevice.OpenModeFlag.ReadOnly)
    reader = QImageReader(buf)
    reader.setAutoTransform(True)  # a phone photo's EXIF rotation
    size = reader.size()
    if size.isValid() and (size.width() > side or size.height() > side):
        reader.setScaledSize(size.scaled(QSize(side, side), Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    if not image.isNull() and (image.width() > side or image.height() > side):
        image = image.scaled(side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
    return image


class ImageChip(QFrame):
    """A picture's chip: thumbnail, name, pixels and size, and × to remove it."""

    def __init__(self, image: ImageAttachment, on_remove: Callable[[], None]):
        super().__init__()
        self.setObjectName("attachmentChip")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(2, 1, 2, 1)
        lay.setSpacing(4)
        self.thumb = QLabel()
        ratio = self.devicePixelRatioF() or 1.0
        pixmap = QPixmap.fromImage(thumbnail(image.data, round(CHIP_THUMB * ratio)))
        pixmap.setDevicePixelRatio(ratio)
        self.thumb.setPixmap(pixmap)
        self.thumb.setFixedSize(CHIP_THUMB, CHIP_THUMB)
        self.thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.name_label = ElidedLabel(image.name, mode=Qt.TextElideMode.ElideMiddle, min_chars=6)
        self.size_label = QLabel(f"· {image.label}")
        self.setToolTip(f"{image.name}: a {image.format} picture, {image.label} pixels, {human_bytes(len(image.data))}; "
                        "sent to the model as it is")
        self.name_label.setToolTip(self.toolTip())
        self.remove_btn = QToolButton()
        self.remove_btn.setText("×")
        self.remove_btn.setAutoRaise(True)
        self.remove_btn.setToolTip(f"Remove {image.name}")
        self.remove_btn.clicked.connect(lambda _=False: on_remove())
        lay.addWidget(self.thumb)
        lay.addWidget(self.name_label, 1)
        lay.addWidget(self.size_label)
        lay.addWidget(self.remove_btn)

    def text(self) -> str:
        """What the chip says: "chart.png · 1280 × 720"."""
        return f"{self.name_label.text()} {self.size_label.text()}"
