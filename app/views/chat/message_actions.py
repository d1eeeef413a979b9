"""Per-message actions: regenerate the last answer, edit and resend a message, continue a
stopped answer."""

from __future__ import annotations

from ...history import HistoryError, Message
from ...widgets.attachments import Attachment, split_attachments
from .format import stats_text


class MessageActionsMixin:
    """ChatView's Regenerate, Edit and Continue."""

    def _on_message_action(self, action: str, message_id: int) -> None:
        if self.worker is not None or self.conversation_id is None:
            self.message.emit("Stop the running answer first")
            return
        {"regenerate": self.regenerate, "edit": self.edit_message, "continue": self.continue_answer,
         "older": lambda mid: self.show_version(mid, -1), "newer": lambda mid: self.show_version(mid, +1),
         }[action](message_id)

    def _can_generate(self) -> bool:
        if self.session.engine is None:
            self.error.emit("No model loaded: pick one in the bar above the chat (or in Models) and Load")
            return False
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return False
        return self.worker is None and self.conversation_id is not None

    def _last_answer(self, message_id: int) -> Message | None:
        """The conversation's last message when it is the answer `message_id`."""
        msgs = self.history.messages(self.conversation_id) if self.conversation_id is not None else []
        if not msgs or msgs[-1].id != message_id or msgs[-1].role != "assistant":
            self.message.emit("Only the last answer can be regenerated or continued")
            return None
        return msgs[-1]

    def regenerate(self, message_id: int) -> None:
        """Answer the same conversation again as a new version of the last answer; the earlier
        versions stay, browsable with "‹ 1/2 ›" under it."""
        if not self._can_generate() or self._last_answer(message_id) is None:
            return
        cid = self.conversation_id
        prior = self._conversation_chat(before=message_id)
        fit = self._fit_to_context(prior) if prior else None
        if fit is None:
            return
        chat = [m for m in fit.messages if m["role"] != "system"]
        try:
            self._assistant_msg = self.history.new_version(message_id)
        except HistoryError:  # the window has said so; the answer shown stays as it was
            return
        self.transcript.set_messages([m for m in self.history.messages(cid) if m.id != message_id])
        self._show_context_note(fit.note)
        self.auto_note.hide()
        self._start_answer(chat)

    def show_version(self, message_id: int, step: int) -> None:
        """Show the answer's previous (-1) or next (+1) version: the chat, its export and the
        next question use the chosen one."""
        m = self.transcript.message(message_id)
        if m is None or not 1 <= m.version + step <= m.versions:
            return
        try:
            chosen = self.history.choose_version(message_id, m.version + step)
        except (HistoryError, KeyError) as e:
            self.message.emit(str(e))
            return
        self.transcript.show_in_place(self.history.messages(chosen.conversation_id))
        if chosen.stats and chosen.id == self.transcript.last_answer_id():
            self.stats_label.setText(stats_text(chosen.stats))
        self.message.emit(f"Answer {chosen.version} of {chosen.versions}")

    def continue_answer(self, message_id: int) -> None:
        """Generate more of a stopped answer and append it: the prompt is the conversation with
        the partial answer as the open assistant turn (engine.decoding.prompting.chat.continuation_tokens)."""
        if not self._can_generate():
            return
        last = self._last_answer(message_id)
        if last is None or not last.content:
            return
        from engine.decoding.prompting.chat import continuation_tokens
        from engine.errors import TandemError

        msgs = self.history.messages(self.conversation_id)
        chat = [{"role": m.role, "content": m.content} for m in msgs if m.role in ("user", "assistant") and m.content]
        system = self.system.toPlainText()
        if system:
            chat.insert(0, {"role": "system", "content": system})
        try:
            tokens = continuation_tokens(self.session.engine.target, chat)
        except TandemError as e:
            self.error.emit(str(e))
            return
        self.transcript.set_messages(msgs[:-1])
        self._assistant_msg = last
        self._answer_prefix = last.content
        self._start_answer(tokens, chat=False)
        seeded = _stored_tokens(last)  # the stored part shows first, in its colours
        self._stream_tokens = list(seeded)
        self.transcript.append_tokens(seeded)
        self.transcript.flush()  # rendered at once, as it was: the continuation grows the rendered answer

    def edit_message(self, message_id: int) -> None:
        """Put a user message in the prompt box, its files back as chips; Send replaces it and
        drops what follows."""
        m = self.transcript.message(message_id)
        if m is None or m.role != "user" or self.conversation_id is None:
            return
        self._editing = (self.conversation_id, message_id)
        typed, files = split_attachments(m.content, m.spans)
        self.attachments.clear()
        for name, text in files:
            self.attachments.add(Attachment(name, text, *self.counter.count(text)))
        self.prompt.setPlainText(typed)
        self.edit_label.show()
        self.prompt.setFocus()

    def cancel_edit(self) -> None:
        self._editing = None
        self.edit_label.hide()
        self.prompt.clear()
        self.attachments.clear()  # the edited message's files went back as chips

    def _drop_edit_notice(self) -> None:
        """Another conversation opened: an edit of this one no longer applies."""
        if self._editing is not None and self._editing[0] != self.conversation_id:
            self._editing = None
            self.edit_label.hide()

    def _drop_edited_message(self) -> None:
        """Before Send stores the new message: remove the edited one and everything after it."""
        editing, self._editing = self._editing, None
        self.edit_label.hide()
        if editing is not None and editing[0] == self.conversation_id:
            self.history.delete_messages_from(*editing)




class _StoredToken:
    """A stored answer's run of one provenance, shaped like a TokenEvent for the transcript."""

    __slots__ = ("text", "provenance")

    def __init__(self, text: str, provenance: str):
        self.text, self.provenance = text, provenance


def _stored_tokens(m: Message) -> list[_StoredToken]:
    out, pos = [], 0
    for n, prov in m.spans:
        out.append(_StoredToken(m.content[pos:pos + n], prov))
        pos += n
    if pos < len(m.content):
        out.append(_StoredToken(m.content[pos:], "plain"))
    return out
