"""Reading attached files off the GUI thread. A large PDF or workbook can take seconds to
parse and its text a while to tokenize; done in the window's own thread that froze the
window (no repaint, no Stop, no typing). A ReadFiles worker reads and counts each file on
its own thread and hands each result to the GUI thread as it is ready. For a model that sees,
a PDF without a text layer (a scan) is read as its pages' pictures instead, rendered here too.

Counting uses the loaded target's tokenizer, which is read-only and safe beside a running
generation (app/widgets/controls/token_meter.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtCore import Signal

from engine.documents import Document
from engine.documents.images import ImageError, ImageInput

from ...workers import Worker
from .attachments import AttachmentError, read_attachment

Count = Callable[[str], "tuple[int, bool]"]


@dataclass
class FileRead:
    """One file's outcome: its document and size in tokens, or a scan's pages as pictures, or the
    line refusing it."""

    path: str
    doc: Document | None = None
    pictures: tuple[ImageInput, ...] = ()
    error: str = ""
    tokens: int = 0
    exact: bool = False
    section_counts: list[int] = field(default_factory=list)  # only for a document larger than the context


def read_and_count(path: str, count: Count, n_ctx: int, pictures: bool = False) -> FileRead:
    """Read `path` and count its tokens; a document that does not fit `n_ctx` and has several
    sections also gets each section's count, for the person choosing some of them. With
    `pictures` (the model sees), a scanned PDF's pages come back as pictures."""
    try:
        doc = read_attachment(path)
    except AttachmentError as e:
        if not (pictures and e.scanned):
            return FileRead(path, error=str(e))
        from engine.documents.pdf_images import pdf_page_images

        try:
            return FileRead(path, pictures=pdf_page_images(path))
        except ImageError as refusal:
            return FileRead(path, error=str(refusal))
    tokens, exact = count(doc.text)
    counts = [count(s.text)[0] for s in doc.sections] if tokens >= n_ctx and len(doc.sections) > 1 else []
    return FileRead(path, doc, tokens=tokens, exact=exact, section_counts=counts)


class ReadFiles(Worker):
    """Reads `paths` in order on its own thread; `read` carries each FileRead as it is done."""

    read = Signal(object)  # FileRead

    def __init__(self, paths: list[str], count: Count, n_ctx: int, pictures: bool = False):
        super().__init__()
        self.paths, self.count, self.n_ctx, self.pictures = list(paths), count, n_ctx, pictures

    def work(self) -> None:
        for path in self.paths:
            if self.cancelled:
                return
            self.read.emit(read_and_count(path, self.count, self.n_ctx, self.pictures))


@dataclass
class Reading:
    """A batch of files being read for the chat: what is still to come (names, for "Reading
    …"), what has been read and not yet attached, the refusals so far (one message at the end)."""

    worker: ReadFiles
    pending: list[str]
    results: list[FileRead] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    done: bool = False
    conversation: int | None = None  # the chat the files were added in (None: a new chat): they go there
