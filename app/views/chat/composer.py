"""What goes with the prompt and what comes out of the chat: attachments, the token meter,
Markdown export and Copy."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog

from ...history import HistoryError
from ...widgets.attachments import Attachment, AttachmentError, read_text_file
from ...widgets.toast import toast
from ...widgets.transcript import message_text


class ComposerMixin:
    """ChatView's attachments, token meter, export and copy."""

    def choose_attachments(self) -> None:
        """The Attach button: pick one or more text files."""
        paths, _ = QFileDialog.getOpenFileNames(
            self, "Attach text files", "",
            "Text (*.txt *.md *.markdown *.csv *.json *.py *.rst *.log);;All files (*)")
        self.attach_files(paths)

    def attach_files(self, paths: list[str]) -> None:
        for p in paths:
            self.attach_file(p)

    def attach_file(self, path: str) -> bool:
        """Attach a UTF-8 text file as a chip; refused (one line) if unreadable or larger than the context."""
        try:
            name, text = read_text_file(path)
        except AttachmentError as e:
            self.error.emit(str(e))
            return False
        tokens, exact = self.counter.count(text)
        n_ctx = self._context_size()
        if tokens >= n_ctx:
            self.error.emit(f"{name} is {'' if exact else '≈'}{tokens:,} tokens but the context holds {n_ctx:,}: "
                            "not attached (load the model with a longer context in the bar above the chat)")
            return False
        self.attachments.add(Attachment(name, text, tokens, exact))
        return True

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
        self.attachments.recount(self.counter.count)
        self.meter.update_now()
        if self.conversation_id is not None and self.worker is None:  # the file cards' token counts
            self.transcript.show_in_place(self.history.messages(self.conversation_id))

    def export_conversation(self, path: str | None = None) -> None:
        if self.conversation_id is None:
            self.message.emit("Nothing to export yet")
            return
        if path is None:
            conv = self.history.get(self.conversation_id)
            default = safe_file_name(conv.title if conv else "conversation") + ".md"
            path, _ = QFileDialog.getSaveFileName(self, "Export as Markdown", default, "Markdown (*.md)")
            if not path:
                return
        try:
            Path(path).write_text(self.history.to_markdown(self.conversation_id), encoding="utf-8")
        except OSError as e:
            self.error.emit(f"{path}: cannot write ({e.strerror})")
            return
        self.message.emit(f"Exported to {path}")
        toast(self, f"Exported to {Path(path).name}")

    def export_answer(self, path: str | None = None) -> None:
        text = self.answer_markdown()
        if not text:
            self.message.emit("No answer to export yet")
            return
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Export the answer as Markdown", "answer.md", "Markdown (*.md)")
            if not path:
                return
        try:
            Path(path).write_text(text + "\n", encoding="utf-8")
        except OSError as e:
            self.error.emit(f"{path}: cannot write ({e.strerror})")
            return
        self.message.emit(f"Exported to {path}")
        toast(self, f"Exported to {Path(path).name}")

    def copy_last_answer(self) -> None:
        if self.conversation_id is None:
            return
        last = next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)
        if last is not None:
            QGuiApplication.clipboard().setText(message_text(last))
            self.message.emit("Answer copied as text (Copy as Markdown is under the answer)")
            toast(self, "Answer copied")


def safe_file_name(title: str) -> str:
    """A conversation title as a file name: whole, with the characters file systems refuse replaced."""
    name = "".join("-" if c in '/\\:*?"<>|' or ord(c) < 32 else c for c in title).strip(" .")
    return name or "conversation"
