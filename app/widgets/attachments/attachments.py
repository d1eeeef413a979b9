"""Attached files as removable chips, and the ways a file arrives: the Attach button, a
drop onto the chat, a paste of copied files. Documents (PDF, DOCX, spreadsheets, slides,
HTML, EPUB, RTF) are read by engine.documents, as `tandem generate --attach` reads them.

A chip shows the file's name, its size in tokens of the loaded target ("≈" and a
characters/4 estimate when no model is loaded) and the share of the context that is, so a
person sees what an attachment costs before sending it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QEvent, QMimeData, QObject, Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QSizePolicy, QToolButton, QWidget

from engine.documents import MAX_TEXT_BYTES, Document, attachment_block as _block, read_document
from engine.documents.reader import NoTextLayer
from engine.errors import DocumentError

from ..controls.elided_label import ElidedLabel
from ..controls.flow_layout import FlowLayout
from .images import IMAGE_FILTER, ImageAttachment, ImageChip, has_image, mime_images

MAX_ATTACHMENT = MAX_TEXT_BYTES  # a text file's bytes: more is not a prompt, and would freeze the tokenizer call
FILE_FILTER = ("Documents, text and pictures (*.pdf *.docx *.xlsx *.xlsm *.ods *.pptx *.html *.htm *.epub *.rtf *.txt "
               "*.md *.markdown *.csv *.tsv *.json *.py *.rst *.log *.xml *.yaml *.yml *.toml *.png *.jpg *.jpeg *.webp);;"
               + IMAGE_FILTER + ";;All files (*)")


@dataclass
class Attachment:
    name: str
    text: str
    tokens: int
    exact: bool  # counted with the loaded target's tokenizer (else a characters/4 estimate)
    n_ctx: int = 0  # the context it goes into (0: unknown)

    @property
    def size_label(self) -> str:
        return f"{'' if self.exact else '≈'}{self.tokens:,} tokens"

    @property
    def share_label(self) -> str:
        """How much of the context it takes: "12% of context" ("" when unknown)."""
        if self.n_ctx <= 0:
            return ""
        share = 100 * self.tokens / self.n_ctx
        return f"{'<1' if 0 < share < 1 else f'{share:.0f}'}% of context"


class AttachmentError(ValueError):
    """A file that cannot be attached; the message is one line for the user. `scanned`: a PDF
    without a text layer, whose pages a model that sees can take as pictures."""

    def __init__(self, message: str, *, scanned: bool = False):
        super().__init__(message)
        self.scanned = scanned


def read_attachment(path: str | Path) -> Document:
    """The document at `path` (any kind engine.documents reads), else AttachmentError in one line."""
    try:
        return read_document(path)
    except DocumentError as e:
        raise AttachmentError(str(e), scanned=isinstance(e, NoTextLayer)) from None


def read_text_file(path: str | Path) -> tuple[str, str]:
    """(name, text) of a file as it would be attached: a text file of at most MAX_ATTACHMENT
    bytes decoded as the CLI decodes a prompt file (UTF-8; UTF-16/32 by their byte-order mark,
    which is dropped) but strictly, or a document's text; else AttachmentError."""
    doc = read_attachment(path)
    return doc.name, doc.text


def local_files(mime: QMimeData | None) -> list[str]:
    """Paths of the local files a drop or a paste carries (file managers put them as URLs)."""
    if mime is None or not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile()]


TEXT, FILE = "text", "file:"  # the labels of a user message's parts (its stored spans)


def attachment_block(a: Attachment) -> str:
    """How an attachment is put into the user's message (kept verbatim in history); the CLI's
    --attach writes the same block."""
    return _block(a.name, a.text)


def compose(text: str, attachments: list[Attachment]) -> tuple[str, list[tuple[int, str]]]:
    """The user's message as stored and sent (each attachment's block, then what was typed,
    joined by blank lines: files first, so questions about the same files share the prompt's
    start that the prompt cache keeps) and its parts as (characters, label) spans: TEXT for
    the typed text and the separators, FILE + name for each block. The transcript finds the
    files by these spans, never by parsing text that a file (or the typed text) could imitate."""
    parts: list[tuple[str, str]] = []
    for a in attachments:
        if parts:
            parts.append(("\n\n", TEXT))
        parts.append((attachment_block(a), FILE + a.name))
    if text:
        parts += [("\n\n", TEXT), (text, TEXT)] if parts else [(text, TEXT)]
    spans: list[tuple[int, str]] = []
    for chunk, label in parts:
        if spans and spans[-1][1] == label == TEXT:
            spans[-1] = (spans[-1][0] + len(chunk), TEXT)
        else:
            spans.append((len(chunk), label))
    return "".join(chunk for chunk, _ in parts), spans


def _file_of(block: str, name: str) -> str | None:
    """The file's text inside its block (None: the block is not one `attachment_block` made)."""
    head = f"Attached file `{name}`:\n\n"
    if not block.startswith(head):
        return None
    fence, nl, rest = block[len(head):].partition("\n")
    if not nl or not fence.startswith("```") or fence.strip("`") or not rest.endswith("\n" + fence):
        return None
    return rest[:-len(fence) - 1]


_BLOCK = re.compile(r"Attached file `([^`\n]+)`:\n\n(`{3,})\n(.*?)\n\2(?=\n\nAttached file `|\Z)", re.DOTALL)


def split_attachments(content: str, spans: list[tuple[int, str]] | None = None) -> tuple[str, list[tuple[str, str]]]:
    """A stored user message as (what was typed, [(file name, file text), ...]): the inverse
    of `compose`, read from its spans. A message stored before messages had spans (`spans`
    empty) is parsed as that version composed it."""
    if not spans:
        return _split_legacy(content)
    if sum(n for n, _ in spans) != len(content):
        return content, []  # not spans this version wrote: show the text as it is
    files: list[tuple[str, str]] = []
    typed: list[str] = []
    pos = 0
    for i, (n, label) in enumerate(spans):
        chunk, pos = content[pos:pos + n], pos + n
        if not label.startswith(FILE):  # the typed text and the blank lines around the files
            if i > 0:
                chunk = chunk.removeprefix("\n\n")  # after a file (this version: files first)
            if i < len(spans) - 1:
                chunk = chunk.removesuffix("\n\n")  # before a file (earlier versions: text first)
            typed.append(chunk)
            continue
        text = _file_of(chunk, label[len(FILE):])
        if text is None:
            return content, []
        files.append((label[len(FILE):], text))
    return ("".join(typed), files) if files else (content, [])


_LEAD = re.compile(r"Attached file `([^`\n]+)`:\n\n(`{3,})\n(.*?)\n\2(?=\n\n|\Z)", re.DOTALL)


def _split_legacy(content: str) -> tuple[str, list[tuple[str, str]]]:
    """The files of a message stored without spans, found by their markers (ambiguous when a
    file holds a marker itself: what messages stored now avoid): files then text, as this
    version composes, or text then files, as earlier versions did."""
    files, pos = [], 0
    while (m := _LEAD.match(content, pos)) is not None:  # files first
        files.append((m.group(1), m.group(3)))
        pos = m.end() + 2
    if files:
        return content[pos:] if pos <= len(content) else "", files
    first = _BLOCK.search(content)
    if first is None or (first.start() and not content[:first.start()].endswith("\n\n")):
        return content, []
    files, pos = [], first.start()
    for m in _BLOCK.finditer(content, pos):
        if m.start() != pos:
            return content, []  # not our composition after all: show it as it is
        files.append((m.group(1), m.group(3)))
        pos = m.end() + 2
    if pos - 2 != len(content):
        return content, []
    return content[:first.start()].removesuffix("\n\n"), files


class PromptEdit(QPlainTextEdit):
    """The prompt box: pasted or dropped files become attachments instead of their paths as
    text, and a pasted or dropped picture (a screenshot) a picture attachment, unless text
    comes with it (then the text is pasted, as before)."""

    filesArrived = Signal(list)  # [path, ...]
    imagesArrived = Signal(list)  # [(name, bytes), ...]

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return bool(local_files(source)) or has_image(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = local_files(source)
        if files:
            self.filesArrived.emit(files)
            return
        images = [] if source.hasText() else mime_images(source)  # cells copied from a spreadsheet bring a
        if images:  # picture of themselves too: their text is what was meant
            self.imagesArrived.emit(images)
            return
        super().insertFromMimeData(source)


class FileDropFilter(QObject):
    """Event filter that takes file and picture drops on a widget that would not accept them
    itself (the read-only transcript) and hands the paths, or the pictures, on."""

    def __init__(self, on_files: Callable[[list[str]], None], parent: QObject | None = None,
                 on_images: Callable[[list[tuple[str, bytes]]], None] | None = None):
        super().__init__(parent)
        self.on_files, self.on_images = on_files, on_images

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        t = event.type()
        if t in (QEvent.Type.DragEnter, QEvent.Type.DragMove) and (
                local_files(event.mimeData()) or (self.on_images is not None and has_image(event.mimeData()))):
            event.acceptProposedAction()
            return True
        if t == QEvent.Type.Drop:
            files = local_files(event.mimeData())
            images = [] if files or self.on_images is None else mime_images(event.mimeData())
            if files or images:
                event.acceptProposedAction()
                self.on_files(files) if files else self.on_images(images)  # type: ignore[misc]
                return True
        return False


def recount(items: list[Attachment], count: Callable[[str], tuple[int, bool]], n_ctx: int = 0) -> None:
    """Count `items` again, in place, with another tokenizer and context."""
    for a in items:
        a.tokens, a.exact = count(a.text)
        a.n_ctx = n_ctx or a.n_ctx


def with_file(items: list[Attachment], a: Attachment) -> list[Attachment]:
    """`items` with `a` attached: attaching the same name again replaces the earlier one."""
    return [x for x in items if x.name != a.name] + [a]


class _Chip(QFrame):
    def __init__(self, a: Attachment, on_remove: Callable[[], None]):
        super().__init__()
        self.setObjectName("attachmentChip")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 1, 2, 1)
        lay.setSpacing(2)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        # the name gives way (elided in the middle) before the size and the share of the context do
        self.name_label = ElidedLabel(a.name, mode=Qt.TextElideMode.ElideMiddle, min_chars=6)
        share = f" · {a.share_label.removesuffix(' of context')}" if a.share_label else ""  # next to the meter
        self.size_label = QLabel(f"· {a.size_label}{share}")
        self.setToolTip(f"{a.name}: {len(a.text):,} characters, {a.size_label}"
                        + ("" if a.exact else " (estimated: no model is loaded)")
                        + (f", {a.share_label} ({a.n_ctx:,} tokens)" if a.share_label else ""))
        self.name_label.setToolTip(self.toolTip())
        self.remove_btn = QToolButton()
        self.remove_btn.setText("×")
        self.remove_btn.setAutoRaise(True)
        self.remove_btn.setToolTip(f"Remove {a.name}")
        self.remove_btn.clicked.connect(lambda _=False: on_remove())
        lay.addWidget(self.name_label, 1)
        lay.addWidget(self.size_label)
        lay.addWidget(self.remove_btn)

    def text(self) -> str:
        """What the chip says: "notes.pdf · 1,234 tokens · 12%" (of the context, its tooltip says)."""
        return f"{self.name_label.text()} {self.size_label.text()}"


class AttachmentChips(QWidget):
    """Chips, one per attached picture (first: the prompt puts them first) and per attached
    file, wrapping onto more lines when the row is full; hidden while empty."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._items: list[Attachment] = []
        self._images: list[ImageAttachment] = []
        self._row = FlowLayout(self)
        self.chips: list[_Chip] = []
        self.image_chips: list[ImageChip] = []
        # any width: many chips wrap onto more lines rather than widen the window
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.hide()

    def items(self) -> list[Attachment]:
        return list(self._items)

    def add(self, a: Attachment) -> None:
        """Attach a file; attaching the same name again replaces the earlier one."""
        self._items = with_file(self._items, a)
        self._rebuild()

    def remove(self, name: str) -> None:
        self._items = [x for x in self._items if x.name != name]
        self._rebuild()

    def images(self) -> list[ImageAttachment]:
        return list(self._images)

    def add_image(self, image: ImageAttachment) -> None:
        """Attach a picture; the same picture again (by content) is attached once."""
        self._images = [x for x in self._images if x.sha256 != image.sha256] + [image]
        self._rebuild()

    def remove_image(self, sha256: str) -> None:
        self._images = [x for x in self._images if x.sha256 != sha256]
        self._rebuild()

    def clear(self) -> None:
        self._items, self._images = [], []
        self._rebuild()

    def set_items(self, items: list[Attachment], images: list[ImageAttachment] | None = None) -> None:
        """Show these files and pictures instead (another chat's unsent ones)."""
        self._items, self._images = list(items), list(images or [])
        self._rebuild()

    def recount(self, count: Callable[[str], tuple[int, bool]], n_ctx: int = 0) -> None:
        """Count again with another tokenizer (a model was loaded or unloaded) and context."""
        recount(self._items, count, n_ctx)
        self._rebuild()

    def _rebuild(self) -> None:
        for c in [*self.image_chips, *self.chips]:
            self._row.removeWidget(c)
            c.hide()  # gone now, not only when the deferred delete runs
            c.deleteLater()
        self.chips, self.image_chips = [], []
        for im in self._images:
            ichip = ImageChip(im, lambda sha=im.sha256: self.remove_image(sha))
            self._row.addWidget(ichip)
            self.image_chips.append(ichip)
        for a in self._items:
            chip = _Chip(a, lambda name=a.name: self.remove(name))
            self._row.addWidget(chip)
            self.chips.append(chip)
        self.setVisible(bool(self._items or self._images))
        self.changed.emit()
