"""What goes with the prompt and what comes out of the chat: attachments (documents too, or
the pages of one larger than the context; pictures for a model that sees, through pictures.py), the token meter, export (Markdown, Word, PDF,
HTML) and Copy (rich text and plain).

`Composer` is the page's: it is given the widgets it fills and reads (the answer column's
prompt, chips, reading note, meter and transcript; the settings' system prompt and max
tokens) and asks the page only for the open conversation and whether an answer is running.
It keeps each chat's unsent prompt and files until that chat is open again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialog, QFileDialog, QWidget

from engine.documents import Document

from ...history import History, HistoryError
from ...history.pictures import image_bytes
from ...session import Session
from ... import workers
from ...widgets.attachments.attachments import FILE_FILTER, Attachment, compose, recount, with_file
from ...widgets.attachments.document_reader import FileRead, ReadFiles, Reading
from ...widgets.attachments.images import ImageAttachment, image_attachment, is_image_file, read_image_file
from .pictures import Pictures, PictureTokens
from ...history.archive import write_archive
from ...widgets.transcript.export import ARCHIVE, CHAT_FILTERS, FILTERS, ExportError, answer_markdown, \
    conversation_markdown, file_name, rich_mime, with_suffix, write_report
from ...widgets.attachments.section_picker import SectionPicker
from ...widgets.controls.toast import toast
from ...widgets.controls.token_meter import TokenCounter
from ...widgets.transcript.transcript import message_text
from .layout import AnswerColumn
from .settings_panel import SettingsPanel


class Composer(QObject):
    """The chat's attachments, token meter, unsent drafts, export and copy."""

    def __init__(self, session: Session, history: History, counter: TokenCounter, column: AnswerColumn,
                 settings: SettingsPanel, page: QWidget, *, conversation: Callable[[], int | None],
                 answering: Callable[[], bool], notify: Callable[[str], None], fail: Callable[[str], None]) -> None:
        super().__init__(page)
        self.session, self.history, self.counter, self._page = session, history, counter, page
        self._conversation, self._answering, self._notify, self._fail = conversation, answering, notify, fail
        self.prompt, self.attachments, self.reading_label, self.meter, self.transcript, self.model_bar = (
            column.prompt, column.attachments, column.reading_label, column.meter, column.transcript,
            column.model_bar)
        self.system, self.max_tokens = settings.system, settings.max_tokens
        self._drafts: dict[int | None, str] = {}  # unsent prompts of the other conversations (None: a new chat)
        self._pending_files: dict[int | None, list[Attachment]] = {}  # and their attached files, not yet sent
        self._pending_images: dict[int | None, list[ImageAttachment]] = {}  # and pictures
        self._readers: list[Reading] = []  # batches of attached files being read on worker threads
        self._attaching = False  # attaching what was read (a section picker may be open)
        self._count_lock = threading.Lock()  # a reading worker's token count vs the model being closed
        self._closing_engine: object = None
        self.section_picker: SectionPicker | None = None  # open while a document's pages are chosen
        self.pictures = Pictures(session, column.attachments, fail)  # attached pictures, for a model that sees
        self.picture_tokens = PictureTokens(session, history)  # what they take of the context, for the meter
        column.transcript.load_image = lambda sha: image_bytes(history, sha)  # a sent question's thumbnails
        column.filesDropped.connect(self.attach_files)
        column.imagesDropped.connect(self.attach_images)
        column.attachments.changed.connect(self.schedule_meter)
        column.prompt.textChanged.connect(self.schedule_meter)
        settings.max_tokens.valueChanged.connect(self.schedule_meter)
        settings.system.textChanged.connect(self.schedule_meter)
        session.engineClosing.connect(self.engine_closing)
        session.pairChanged.connect(self.model_changed)

    @property
    def conversation_id(self) -> int | None:
        return self._conversation()

    def compose(self, text: str) -> str:
        """The user's message as stored and sent: the typed text, then each attachment."""
        return compose(text, self.attachments.items())[0]

    def switch_draft(self, frm: int | None, to: int | None, *, keep: bool) -> None:
        """Keep the unsent prompt and attached files with the conversation they were added in
        (they would be sent there, never in another chat); bring back `to`'s. `keep` False:
        what is in the prompt is an edit in progress (its files as chips too), dropped."""
        if to == frm:
            return
        text, files, images = self.prompt.toPlainText(), self.attachments.items(), self.attachments.images()
        for kept, value in ((self._drafts, text if text.strip() else ""), (self._pending_files, files),
                            (self._pending_images, images)):
            if value and keep:
                kept[frm] = value  # type: ignore[index]
            else:
                kept.pop(frm, None)  # type: ignore[attr-defined]
        self.prompt.setPlainText(self._drafts.pop(to, ""))
        self.attachments.set_items(self._pending_files.pop(to, []), self._pending_images.pop(to, []))

    def choose_attachments(self) -> None:
        """The Attach button: pick one or more documents, text files or pictures."""
        paths, _ = QFileDialog.getOpenFileNames(self._page, "Attach documents, text files or pictures", "", FILE_FILTER)
        self.attach_files(paths)

    def attach_images(self, arrived: list[tuple[str, bytes]]) -> None:
        """Pictures pasted or dropped: each a chip with its thumbnail (`pictures.py` checks them)."""
        self.pictures.attach([(name, lambda data=data, name=name: image_attachment(data, name))
                              for name, data in arrived])

    def attach_files(self, paths: list[str]) -> None:
        """Attach each file: read and counted on a worker thread (a large PDF never freezes the
        window), each a chip as soon as it is read; the ones refused are named together in one
        message, a line each, once the last is read."""
        paths = [p for p in paths if p]
        pictures = [p for p in paths if is_image_file(p)]
        if pictures:  # read here: a picture is checked by its header, not parsed like a document
            self.pictures.attach([(Path(p).name, lambda p=p: read_image_file(p)) for p in pictures])
            paths = [p for p in paths if p not in pictures]
        if not paths:
            return
        reader = ReadFiles(paths, self._count_off_thread, self.context_size(), pictures=self.session.sees_images)
        batch = Reading(reader, [Path(p).name for p in paths], conversation=self.conversation_id)
        self._readers.append(batch)
        batch.worker.read.connect(lambda r: (batch.results.append(r), self._attach_ready()))
        batch.worker.finished.connect(lambda: (setattr(batch, "done", True), self._attach_ready()))
        self._show_reading()
        workers.start(batch.worker)

    def _count_off_thread(self, text: str) -> tuple[int, bool]:
        """A reading worker's count: never with a model being closed (its tokenizer would be
        freed under it); then the characters/4 estimate, which the new model recounts."""
        with self._count_lock:
            eng = self.session.engine
            if eng is None or eng is self._closing_engine:
                return (len(text) + 3) // 4, False
            return self.counter.count(text)

    def engine_closing(self, engine: object) -> None:
        """The session closes `engine` when this returns: a count in flight with it ends first."""
        self._closing_engine = engine
        with self._count_lock:
            pass

    @property
    def reading(self) -> bool:
        """Attached files are still being read (Send waits for them)."""
        return bool(self._readers)

    def _attach_ready(self) -> None:
        """Attach what has been read, batch by batch, one file at a time: a section picker's own
        event loop delivers the next results, which wait for it instead of opening another."""
        if self._attaching:
            return
        self._attaching = True
        try:
            while self._readers:
                batch = self._readers[0]
                while batch.results:
                    r = batch.results.pop(0)
                    batch.pending.remove(Path(r.path).name)
                    self._show_reading()
                    if r.pictures:  # a scan's pages, for the model that sees
                        self._attach_pages(batch, r)
                        continue
                    a = self._attach_read(r, batch.refused)
                    if a is not None:
                        self._attach_to(batch.conversation, a)
                if not batch.done:
                    return
                self._readers.pop(0)
                self._show_reading()
                if batch.refused:
                    self._fail("\n".join(batch.refused))
        finally:
            self._attaching = False

    def _show_reading(self) -> None:
        names = [n for batch in self._readers for n in batch.pending]
        self.reading_label.setText(f"Reading {', '.join(names)}…" if names else "")
        self.reading_label.setVisible(bool(names))

    def stop_reading(self) -> None:
        """The window is closing: read no further files (the one being read ends on its own)."""
        for batch in self._readers:
            batch.worker.cancel()

    def _attach_to(self, conversation: int | None, a: Attachment) -> None:
        """A file belongs to the chat it was added in: a chip there, or kept with that chat's
        unsent prompt when another chat is open by the time it is read."""
        if conversation == self.conversation_id:
            self.attachments.add(a)
        else:
            self._pending_files[conversation] = with_file(self._pending_files.get(conversation, []), a)

    def _attach_pages(self, batch: Reading, r: FileRead) -> None:
        """A scanned PDF's pages as picture chips, in the chat it was added in (a chat left
        meanwhile gets a line saying to attach it there again)."""
        if batch.conversation != self.conversation_id:
            batch.refused.append(f"{Path(r.path).name}: its pages were ready after you left the chat it was added "
                                 "to; attach it there again")
            return
        self.pictures.attach([(im.name, lambda im=im: image_attachment(im.data, im.name)) for im in r.pictures])

    def _attach_read(self, r: FileRead, refused: list[str]) -> Attachment | None:
        """The attachment a file read by ReadFiles makes. A file without text, or unreadable, is
        refused in one line; one larger than the context offers its pages or sections."""
        if r.doc is None:
            refused.append(r.error)
            return None
        doc, tokens, exact = r.doc, r.tokens, r.exact
        n_ctx = self.context_size()
        if tokens >= n_ctx and len(doc.sections) > 1:
            counts = r.section_counts or [self.counter.count(s.text)[0] for s in doc.sections]
            chosen = self.choose_sections(doc, counts, n_ctx)
            if not chosen:
                self._notify(f"{doc.name}: not attached")
                return None
            doc = doc.excerpt(chosen)
            tokens, exact = self.counter.count(doc.text)
        if tokens >= n_ctx:
            refused.append(f"{doc.name} is {'' if exact else '≈'}{tokens:,} tokens but the context holds {n_ctx:,}: "
                           "not attached (load the model with a longer context in the bar above the chat)")
            return None
        return Attachment(doc.name, doc.text, tokens, exact, n_ctx)

    def choose_sections(self, doc: Document, counts: list[int], n_ctx: int) -> list[int] | None:
        """Ask which pages or sections of `doc` to attach (None: cancelled)."""
        picker = self.section_picker = SectionPicker(doc, counts, n_ctx, self._page)
        try:
            return picker.chosen() if picker.exec() == QDialog.DialogCode.Accepted else None
        finally:
            self.section_picker = None
            picker.deleteLater()

    # -- the token meter -----------------------------------------------------------------
    def context_size(self) -> int:
        eng = self.session.engine
        return int(eng.n_ctx) if eng is not None else self.model_bar.n_ctx()

    def schedule_meter(self, *_: object) -> None:
        self.meter.schedule()

    def measure_prompt(self) -> tuple[int, bool, int]:
        """Tokens of what the next Send would put in the context: system, history, prompt,
        attachments, and the pictures of the history and the chips."""
        contents = [self.system.toPlainText()] if self.system.toPlainText() else []
        msgs = []
        if self.conversation_id is not None:
            try:
                msgs = self.history.messages(self.conversation_id)
            except HistoryError:
                pass
            contents += [m.content for m in msgs if m.role in ("user", "assistant") and m.content]
        contents.append(self.compose(self.prompt.toPlainText().strip()))
        used, exact = self.counter.count_messages(contents)
        used += self.picture_tokens.of(msgs, self.attachments.images())  # each picture's tokens with this model
        return used + self.max_tokens.value(), exact, self.context_size()  # and room for the answer

    def model_changed(self, *_: object) -> None:
        """Another model counts other tokens: recount the chips and the meter."""
        self._closing_engine = None  # closed by now: the new one counts
        self.attachments.recount(self.counter.count, self.context_size())
        for files in self._pending_files.values():  # the other chats' unsent files, as they will be sent
            recount(files, self.counter.count, self.context_size())
        self.meter.update_now()
        if self.conversation_id is not None and not self._answering():  # the file cards' token counts
            self.transcript.show_in_place(self.history.messages(self.conversation_id))

    def _chat_title(self) -> str:
        conv = self.history.get(self.conversation_id) if self.conversation_id is not None else None
        return conv.title if conv else "conversation"

    def _answer_to_export(self) -> Any:
        if self.conversation_id is None:
            return None
        return next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)

    def export_conversation(self, path: str | None = None) -> None:
        """The whole chat as a report (Markdown, Word, PDF or HTML, by the file's suffix), or as
        Tandem's JSON (.json: every version and setting, to import again)."""
        if self.conversation_id is None:
            self._notify("Nothing to export yet")
            return
        conv = self.history.get(self.conversation_id)
        title = conv.title if conv else "conversation"
        markdown = conversation_markdown(title, self.history.messages(self.conversation_id),
                                         conv.system_prompt if conv else "")
        self._export(markdown, title, path, "Export the conversation", file_name(title, ""), CHAT_FILTERS)

    def export_answer(self, path: str | None = None) -> None:
        """The last answer alone, as written: its own headings, tables and code, nothing around it."""
        last = self._answer_to_export()
        if last is None or not last.content.strip():
            self._notify("No answer to export yet")
            return
        title = self._chat_title()
        self._export(answer_markdown(last), title, path, "Export the answer", file_name(title, "") + " - answer")

    def _export(self, markdown: str, title: str, path: str | None, caption: str, default: str,
                filters: str = FILTERS) -> None:
        if path is None:
            path, chosen = QFileDialog.getSaveFileName(self._page, caption, default + ".md", filters)
            if not path:
                return
            path = with_suffix(path, chosen)
        try:
            if filters == CHAT_FILTERS and Path(path).suffix.lower() == ARCHIVE:
                write_archive(self.history, path, [self.conversation_id])
                kind = "JSON"
            else:
                kind = write_report(markdown, path, title)
        except OSError as e:
            self._fail(f"{path}: cannot write ({e.strerror or e})")
            return
        except ExportError as e:
            self._fail(str(e))
            return
        self._notify(f"Exported to {path} ({kind})")
        toast(self._page, f"Exported to {Path(path).name}")

    def copy_last_answer(self) -> None:
        """The answer as rich text (Word and mail keep its headings, tables and code) and as
        plain text for everything else."""
        last = self._answer_to_export()
        if last is not None:
            QGuiApplication.clipboard().setMimeData(rich_mime(answer_markdown(last), message_text(last)))
            self._notify("Answer copied as rich text and plain text (Copy as Markdown is under the answer)")
            toast(self._page, "Answer copied")
