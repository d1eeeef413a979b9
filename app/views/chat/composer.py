"""What goes with the prompt and what comes out of the chat: attachments (documents too, or
the pages of one larger than the context), the token meter, export (Markdown, Word, PDF,
HTML) and Copy (rich text and plain)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialog, QFileDialog

from engine.documents import Document

from ...history import HistoryError
from ... import workers
from ...widgets.attachments.attachments import FILE_FILTER, Attachment, recount, with_file
from ...widgets.attachments.document_reader import FileRead, ReadFiles, Reading
from ...widgets.transcript.export import FILTERS, ExportError, answer_markdown, conversation_markdown, file_name, rich_mime, \
    with_suffix, write_report
from ...widgets.attachments.section_picker import SectionPicker
from ...widgets.controls.toast import toast
from ...widgets.transcript.transcript import message_text


class ComposerMixin:
    """ChatView's attachments, token meter, export and copy."""

    def choose_attachments(self) -> None:
        """The Attach button: pick one or more documents or text files."""
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach documents or text files", "", FILE_FILTER)
        self.attach_files(paths)

    def attach_files(self, paths: list[str]) -> None:
        """Attach each file: read and counted on a worker thread (a large PDF never freezes the
        window), each a chip as soon as it is read; the ones refused are named together in one
        message, a line each, once the last is read."""
        paths = [p for p in paths if p]
        if not paths:
            return
        batch = Reading(ReadFiles(paths, self._count_off_thread, self._context_size()), [Path(p).name for p in paths],
                        conversation=self.conversation_id)
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

    def _engine_closing(self, engine: object) -> None:
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
                    a = self._attach_read(r, batch.refused)
                    if a is not None:
                        self._attach_to(batch.conversation, a)
                if not batch.done:
                    return
                self._readers.pop(0)
                self._show_reading()
                if batch.refused:
                    self.error.emit("\n".join(batch.refused))
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

    def _attach_read(self, r: FileRead, refused: list[str]) -> Attachment | None:
        """The attachment a file read by ReadFiles makes. A file without text, or unreadable, is
        refused in one line; one larger than the context offers its pages or sections."""
        if r.doc is None:
            refused.append(r.error)
            return None
        doc, tokens, exact = r.doc, r.tokens, r.exact
        n_ctx = self._context_size()
        if tokens >= n_ctx and len(doc.sections) > 1:
            counts = r.section_counts or [self.counter.count(s.text)[0] for s in doc.sections]
            chosen = self.choose_sections(doc, counts, n_ctx)
            if not chosen:
                self.message.emit(f"{doc.name}: not attached")
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
        picker = self.section_picker = SectionPicker(doc, counts, n_ctx, self)
        try:
            return picker.chosen() if picker.exec() == QDialog.DialogCode.Accepted else None
        finally:
            self.section_picker = None
            picker.deleteLater()

    # -- the token meter -----------------------------------------------------------------
    def _context_size(self) -> int:
        eng = self.session.engine
        return int(eng.n_ctx) if eng is not None else self.model_bar.n_ctx()

    def _schedule_meter(self, *_: object) -> None:
        self.meter.schedule()

    def _measure_prompt(self) -> tuple[int, bool, int]:
        """Tokens of what the next Send would put in the context: system, history, prompt, attachments."""
        contents = [self.system.toPlainText()] if self.system.toPlainText() else []
        if self.conversation_id is not None:
            try:
                contents += [m.content for m in self.history.messages(self.conversation_id)
                             if m.role in ("user", "assistant") and m.content]
            except HistoryError:
                pass
        contents.append(self._compose(self.prompt.toPlainText().strip()))
        used, exact = self.counter.count_messages(contents)
        return used + self.max_tokens.value(), exact, self._context_size()  # and room for the answer

    def _model_changed(self, *_: object) -> None:
        """Another model counts other tokens: recount the chips and the meter."""
        self._closing_engine = None  # closed by now: the new one counts
        self.attachments.recount(self.counter.count, self._context_size())
        for files in self._pending_files.values():  # the other chats' unsent files, as they will be sent
            recount(files, self.counter.count, self._context_size())
        self.meter.update_now()
        if self.conversation_id is not None and self.worker is None:  # the file cards' token counts
            self.transcript.show_in_place(self.history.messages(self.conversation_id))

    def _chat_title(self) -> str:
        conv = self.history.get(self.conversation_id) if self.conversation_id is not None else None
        return conv.title if conv else "conversation"

    def _answer_to_export(self):
        if self.conversation_id is None:
            return None
        return next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)

    def export_conversation(self, path: str | None = None) -> None:
        """The whole chat as a report (Markdown, Word, PDF or HTML, by the file's suffix)."""
        if self.conversation_id is None:
            self.message.emit("Nothing to export yet")
            return
        conv = self.history.get(self.conversation_id)
        title = conv.title if conv else "conversation"
        markdown = conversation_markdown(title, self.history.messages(self.conversation_id),
                                         conv.system_prompt if conv else "")
        self._export(markdown, title, path, "Export the conversation", file_name(title, ""))

    def export_answer(self, path: str | None = None) -> None:
        """The last answer alone, as written: its own headings, tables and code, nothing around it."""
        last = self._answer_to_export()
        if last is None or not last.content.strip():
            self.message.emit("No answer to export yet")
            return
        title = self._chat_title()
        self._export(answer_markdown(last), title, path, "Export the answer", file_name(title, "") + " - answer")

    def _export(self, markdown: str, title: str, path: str | None, caption: str, default: str) -> None:
        if path is None:
            path, chosen = QFileDialog.getSaveFileName(self, caption, default + ".md", FILTERS)
            if not path:
                return
            path = with_suffix(path, chosen)
        try:
            kind = write_report(markdown, path, title)
        except OSError as e:
            self.error.emit(f"{path}: cannot write ({e.strerror or e})")
            return
        except ExportError as e:
            self.error.emit(str(e))
            return
        self.message.emit(f"Exported to {path} ({kind})")
        toast(self, f"Exported to {Path(path).name}")

    def copy_last_answer(self) -> None:
        """The answer as rich text (Word and mail keep its headings, tables and code) and as
        plain text for everything else."""
        last = self._answer_to_export()
        if last is not None:
            QGuiApplication.clipboard().setMimeData(rich_mime(answer_markdown(last), message_text(last)))
            self.message.emit("Answer copied as rich text and plain text (Copy as Markdown is under the answer)")
            toast(self, "Answer copied")
