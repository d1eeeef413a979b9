"""Attached files as removable chips, and the ways a file arrives: the Attach button, a
drop onto the chat, a paste of copied files.

A chip shows the file's name and its size in tokens of the loaded target ("≈" and a
characters/4 estimate when no model is loaded), so a person sees what an attachment
costs in the context before sending it.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QEvent, QMimeData, QObject, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QSizePolicy, QToolButton, QWidget

from engine.decoding.prompting.prompt_text import decode

MAX_ATTACHMENT = 512 * 1024  # bytes: more is not a prompt, and a larger file would freeze the tokenizer call


@dataclass
class Attachment:
    name: str
    text: str
    tokens: int
    exact: bool  # counted with the loaded target's tokenizer (else a characters/4 estimate)

    @property
    def size_label(self) -> str:
        return f"{'' if self.exact else '≈'}{self.tokens:,} tokens"


class AttachmentError(ValueError):
    """A file that cannot be attached; the message is one line for the user."""


def read_text_file(path: str | Path) -> tuple[str, str]:
    """(name, text) of a text file of at most MAX_ATTACHMENT bytes, else AttachmentError. It is
    decoded as the CLI decodes a prompt file (UTF-8; UTF-16 or UTF-32 by their byte-order mark,
    which is dropped), but strictly: a file with bytes that do not decode is refused."""
    p = Path(path)
    try:
        st = p.stat()  # a missing file says so: "cannot read (No such file or directory)"
        if stat.S_ISDIR(st.st_mode):
            raise AttachmentError(f"{p.name}: is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):  # a pipe or a device would block or never end
            raise AttachmentError(f"{p.name}: not a regular file")
        size = st.st_size
        if size > MAX_ATTACHMENT:  # said before reading: a dropped disk image must not fill memory
            raise AttachmentError(f"{p.name}: {size // 1024:,} KB is too large to attach (at most {MAX_ATTACHMENT // 1024} KB)")
        with p.open("rb") as f:
            data = f.read(MAX_ATTACHMENT + 1)
    except OSError as e:
        raise AttachmentError(f"{p.name}: cannot read ({e.strerror})") from None
    if len(data) > MAX_ATTACHMENT:  # it grew since the check
        raise AttachmentError(f"{p.name}: too large to attach (at most {MAX_ATTACHMENT // 1024} KB)")
    text, undecodable = decode(data)  # the reader of `tandem generate @FILE`: a BOM picks UTF-8/16/32
    if undecodable:
        raise AttachmentError(f"{p.name}: not a UTF-8 text file (nor UTF-16/32 with a byte-order mark)")
    return p.name, text


def local_files(mime: QMimeData | None) -> list[str]:
    """Paths of the local files a drop or a paste carries (file managers put them as URLs)."""
    if mime is None or not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile()]


TEXT, FILE = "text", "file:"  # the labels of a user message's parts (its stored spans)


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the file cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def attachment_block(a: Attachment) -> str:
    """How an attachment is put into the user's message (kept verbatim in history)."""
    fence = _fence(a.text)
    return f"Attached file `{a.name}`:\n\n{fence}\n{a.text}\n{fence}"


def compose(text: str, attachments: list[Attachment]) -> tuple[str, list[tuple[int, str]]]:
    """The user's message as stored and sent (what was typed, then each attachment's block,
    joined by blank lines) and its parts as (characters, label) spans: TEXT for the typed
    text and the separators, FILE + name for each block. The transcript finds the files by
    these spans, never by parsing text that a file (or the typed text) could imitate."""
    parts: list[tuple[str, str]] = [(text, TEXT)] if text else []
    for a in attachments:
        if parts:
            parts.append(("\n\n", TEXT))
        parts.append((attachment_block(a), FILE + a.name))
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
    first, pos = len(content), 0
    for n, label in spans:
        chunk, pos = content[pos:pos + n], pos + n
        if not label.startswith(FILE):
            continue  # the typed text, or the blank line between two files
        text = _file_of(chunk, label[len(FILE):])
        if text is None:
            return content, []
        first = min(first, pos - n)
        files.append((label[len(FILE):], text))
    return (content[:first].removesuffix("\n\n"), files) if files else (content, [])


def _split_legacy(content: str) -> tuple[str, list[tuple[str, str]]]:
    """The files of a message stored without spans, found by their markers (ambiguous when a
    file holds a marker itself: what messages stored now avoid)."""
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
    """The prompt box: pasted or dropped files become attachments instead of their paths as text."""

    filesArrived = Signal(list)  # [path, ...]

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return bool(local_files(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = local_files(source)
        if files:
            self.filesArrived.emit(files)
            return
        super().insertFromMimeData(source)


class FileDropFilter(QObject):
    """Event filter that takes file drops on a widget that would not accept them itself
    (the read-only transcript) and hands the paths on."""

    def __init__(self, on_files: Callable[[list[str]], None], parent: QObject | None = None):
        super().__init__(parent)
        self.on_files = on_files

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        t = event.type()
        if t in (QEvent.Type.DragEnter, QEvent.Type.DragMove) and local_files(event.mimeData()):
            event.acceptProposedAction()
            return True
        if t == QEvent.Type.Drop:
            files = local_files(event.mimeData())
            if files:
                event.acceptProposedAction()
                self.on_files(files)
                return True
        return False


class _Chip(QFrame):
    def __init__(self, a: Attachment, on_remove: Callable[[], None]):
        super().__init__()
        self.setObjectName("attachmentChip")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 1, 2, 1)
        lay.setSpacing(2)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        name = a.name if len(a.name) <= 28 else a.name[:18] + "…" + a.name[-9:]
        self.label = QLabel(f"{name} · {a.size_label}")
        self.label.setToolTip(f"{a.name}: {len(a.text):,} characters, {a.size_label}"
                              + ("" if a.exact else " (estimated: no model is loaded)"))
        self.remove_btn = QToolButton()
        self.remove_btn.setText("×")
        self.remove_btn.setAutoRaise(True)
        self.remove_btn.setToolTip(f"Remove {a.name}")
        self.remove_btn.clicked.connect(lambda _=False: on_remove())
        lay.addWidget(self.label)
        lay.addWidget(self.remove_btn)


class AttachmentChips(QWidget):
    """A row of chips, one per attached file; hidden while empty."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._items: list[Attachment] = []
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.addStretch(1)
        self.chips: list[_Chip] = []
        # many chips may be cut at the right rather than widen the window (each has a tooltip)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hide()

    def items(self) -> list[Attachment]:
        return list(self._items)

    def add(self, a: Attachment) -> None:
        """Attach a file; attaching the same name again replaces the earlier one."""
        self._items = [x for x in self._items if x.name != a.name] + [a]
        self._rebuild()

    def remove(self, name: str) -> None:
        self._items = [x for x in self._items if x.name != name]
        self._rebuild()

    def clear(self) -> None:
        self._items = []
        self._rebuild()

    def recount(self, count: Callable[[str], tuple[int, bool]]) -> None:
        """Count again with another tokenizer (a model was loaded or unloaded)."""
        for a in self._items:
            a.tokens, a.exact = count(a.text)
        self._rebuild()

    def _rebuild(self) -> None:
        for c in self.chips:
            self._row.removeWidget(c)
            c.hide()  # gone now, not only when the deferred delete runs
            c.deleteLater()
        self.chips = []
        for a in self._items:
            chip = _Chip(a, lambda name=a.name: self.remove(name))
            self._row.insertWidget(self._row.count() - 1, chip)
            self.chips.append(chip)
        self.setVisible(bool(self._items))
        self.changed.emit()
