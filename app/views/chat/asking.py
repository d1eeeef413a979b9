"""Asking: what the next answer answers and where it goes. Send (a new question, or an edited
one: a new version of the original, which keeps what followed it), Regenerate (a new version of the last answer),
Continue (more of a stopped answer), and browsing an answer's versions; the answer itself is
written by app/views/chat/answering.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel

from ...history import History, HistoryError, Message, answer_sources
from ...history.branches import choose_question, edit_question
from ...chat_model import model_record
from ...history.settings import chat_settings, save_chat_settings
from ...session import Session
from ...widgets.attachments.attachments import Attachment, AttachmentChips, PromptEdit, compose, split_attachments
from ...widgets.attachments.images import ImageAttachment
from ...widgets.controls.live_label import LiveLabel
from ...widgets.controls.token_meter import TokenCounter
from ...widgets.transcript.transcript import Transcript
from .answering import AnswerStream
from .format import chat_title, last_answer_stats
from .library_ask import LibraryAsk
from . import pictures
from .settings_panel import SettingsPanel

NO_MODEL = "No model loaded: pick one in the bar above the chat (or in Models) and Load"


@dataclass(frozen=True)
class AskView:
    """The widgets a question is read from and its notes shown in."""

    prompt: PromptEdit
    attachments: AttachmentChips
    transcript: Transcript  # also where the per-message links (Regenerate, Edit, …) come from
    stats_label: LiveLabel
    auto_note: QLabel  # why Auto drafted nothing (hidden when a new answer starts)
    context_note: QLabel  # earlier messages left out to fit the context
    edit_label: QLabel  # "Editing a message… Cancel edit"
    counter: TokenCounter  # an edited message's files go back as chips with their counts


class Asking(QObject):
    """Send, Edit, Regenerate, Continue and the answer versions of the open conversation.

    `conversation` tells the conversation open in the page (None: a new chat); Send on a new
    chat creates one and says so with `conversationStarted`, which the page opens. The edit
    in progress (`editing`) is this object's: Send replaces the edited message.
    """

    conversationStarted = Signal(int)

    def __init__(self, session: Session, history: History, stream: AnswerStream, settings: SettingsPanel,
                 view: AskView, conversation: Callable[[], int | None], notify: Callable[[str], None],
                 fail: Callable[[str], None], parent: QObject | None = None, library: LibraryAsk | None = None):
        super().__init__(parent)
        self._library = library  # the chat's Library folder, when one is chosen (library_ask.py)
        self._session, self._history, self._stream, self._settings = session, history, stream, settings
        self._view, self._conversation, self._notify, self._fail = view, conversation, notify, fail
        self.editing: tuple[int, int] | None = None  # (conversation, message) that Send replaces
        view.transcript.messageAction.connect(self.act)
        view.edit_label.linkActivated.connect(lambda _href: self.cancel_edit())

    # -- Send -------------------------------------------------------------------------------
    def send(self) -> None:
        v = self._view
        text, images = v.prompt.toPlainText().strip(), v.attachments.images()
        if not text and not v.attachments.items() and not images:
            return
        if self._session.engine is None:
            self._fail(NO_MODEL)
            return
        if self._session.busy:
            self._notify(f"Busy: {self._session.busy}")
            return
        if not self._settings_usable():
            return
        refused = self._pictures_refused() if images else None
        if refused is not None:  # the chips stay: another model may see them
            self._fail(refused)
            return
        content, parts = compose(text, v.attachments.items())
        prior = self._conversation_chat()
        if prior is None:
            return
        asked = self._ask_library(prior[0] + [{"role": "user", "content": content}], text or content)
        if asked is None:
            return
        chat = asked[0][:-1] + [{**asked[0][-1], "content": pictures.marked(asked[0][-1]["content"], len(images))}]
        groups = prior[1] + [[im.input() for im in images]]
        fit = self._fit_to_context(chat, pictures.kept(groups, 0))
        if fit is None:  # refused before anything is stored: the typed text and the chips stay
            return
        chat = [m for m in fit.messages if m["role"] != "system"]
        sent = pictures.kept(groups, fit.dropped)
        try:
            answer = self._store_question(text, content, pictures.question_spans(images, parts), images)
        except HistoryError:  # disk full, read-only: the window has said so; the typed text stays
            return
        v.prompt.clear()
        v.attachments.clear()
        self._show_context_note(fit.note)
        v.auto_note.hide()
        self.remember_settings(answer.conversation_id)
        self._stream.start(chat, answer, sources=asked[1], images=sent)

    def _ask_library(self, chat: list[dict], question: str) -> tuple[list[dict], list[dict] | None] | None:
        """`chat` as it goes to the model: with the chat's Library folder, its last message
        holds the passages that fit, numbered, and the sources come with it; None after
        saying why it cannot be asked."""
        if self._library is None or self._library.folder() is None:
            return chat, None
        return self._library.prepare(self._session.engine, chat, question, self._settings.system_prompt(),
                                     self._settings.max_tokens.value())

    def remember_settings(self, cid: int, *, answering: bool = True) -> None:
        """The settings as they are become the chat's own (reopened with it): at each answer,
        with the model it is written with (a relaunch reopens the chat on it), and when one is
        changed in the open chat (`answering` False: the chat's model stays the one it used)."""
        values = {k: v for k, v in self._settings.values().items() if k != "system"}  # the conversation's own
        if self._library is not None:
            values.update(self._library.values())
        model = model_record(self._session.pair, self._session.n_ctx) if answering else \
            (chat_settings(self._history, cid) or {}).get("model")
        if model is not None:
            values["model"] = model
        try:
            save_chat_settings(self._history, cid, values)
        except HistoryError:  # the window has said so; the answer goes on
            pass

    def _store_question(self, text: str, content: str, parts: list[tuple[int, str]],
                        images: list[ImageAttachment]) -> Message:
        """Save the question (`parts`: where its pictures, typed text and files are; the
        pictures' bytes once each) and an empty answer to fill, which is returned;
        `HistoryError` when a write fails."""
        system = self._settings.system_prompt()
        pictures.keep(self._history, images)
        cid = self._conversation()
        if cid is None:
            files = [*self._view.attachments.items(), *images]
            title = chat_title(text, files[0].name if files else "")
            cid = self._history.create(title=title, system_prompt=system).id
            self.conversationStarted.emit(cid)
        else:
            self._history.set_system_prompt(cid, system)
        if not self._store_edit(cid, content, parts):
            self._history.add_message(cid, "user", content, spans=parts)
        self._view.transcript.set_messages(self._history.messages(cid))
        return self._history.add_message(cid, "assistant", "", status="generating")

    def _conversation_chat(self, before: int | None = None) -> tuple[list[dict], list[list[Any]]] | None:
        """The open conversation as chat messages, those before message `before` only; while
        editing, only what precedes the edited message (Send replaces it and drops what follows);
        and each message's pictures (pictures.py). None after saying why the pictures cannot
        be sent (a model that reads text only, a picture no longer stored)."""
        from engine.errors import TandemError

        cid = self._conversation()
        if cid is None:
            return [], []
        msgs = self._history.messages(cid)
        if before is None and self.editing is not None and self.editing[0] == cid:
            before = self.editing[1]
        if before is not None:
            msgs = [m for m in msgs if m.id < before]
        if any(pictures.has_pictures(m) for m in msgs):
            why = self._pictures_refused()
            if why is not None:
                self._fail(why)
                return None
        try:
            return pictures.conversation(self._history, msgs)
        except (TandemError, HistoryError) as e:
            self._fail(str(e))
            return None

    def _pictures_refused(self) -> str | None:
        """Why the loaded model cannot take the conversation's pictures (None: it sees)."""
        s = self._session
        return None if s.sees_images else pictures.text_only_line(s.pair.label if s.pair else "the loaded model")

    def _fit_to_context(self, chat: list[dict], images: tuple = ()) -> Any:
        """The chat to send (engine/models/context_window.py's rule), or None after saying why
        not; `images`: the chat's pictures in order, each counted as the tokens it takes."""
        from engine.models.context_window import TooLarge, fit_chat
        from engine.errors import TandemError

        eng, system = self._session.engine, self._settings.system_prompt()
        sys_msgs = [{"role": "system", "content": system}] if system else []
        try:
            sizes = eng.image_tokens(images) if images else []
            return fit_chat(sys_msgs, chat, lambda msgs: len(eng.tokens_for(msgs, chat=True))
                            + pictures.tokens_of(msgs, sizes), eng.n_ctx, self._settings.max_tokens.value())
        except TooLarge as e:
            self._fail(str(e))
        except TandemError as e:  # a chat template that cannot render these messages
            self._fail(str(e))
        return None

    def _show_context_note(self, note: str) -> None:
        self._view.context_note.setText(note)
        self._view.context_note.setVisible(bool(note))
        if note:
            self._notify(note)

    # -- the links under each message -------------------------------------------------------
    def act(self, action: str, message_id: int) -> None:
        """A message's link: regenerate, edit, continue, or an older or newer version."""
        handler = {"regenerate": self.regenerate, "edit": self.edit_message, "continue": self.continue_answer,
                   "older": lambda mid: self.show_version(mid, -1), "newer": lambda mid: self.show_version(mid, +1),
                   }.get(action)
        if handler is None:  # Delete and Fork: keeping.py's
            return
        if self._stream.running or self._conversation() is None:
            self._notify("Stop the running answer first")
            return
        handler(message_id)

    def _can_generate(self) -> bool:
        if self._session.engine is None:
            self._fail(NO_MODEL)
            return False
        if self._session.busy:
            self._notify(f"Busy: {self._session.busy}")
            return False
        return not self._stream.running and self._conversation() is not None and self._settings_usable()

    def _settings_usable(self) -> bool:
        """A seed or stop string that cannot be used stops the answer before anything is stored:
        the line saying why shows under it (unfolded) and in the status bar; the typed text stays."""
        problem = self._settings.problem()
        if problem is None:
            return True
        self._settings.show_problem()
        self._notify(f"{problem} (generation settings, F9)")
        return False

    def _last_answer(self, message_id: int) -> Message | None:
        """The conversation's last message when it is the answer `message_id`."""
        cid = self._conversation()
        msgs = self._history.messages(cid) if cid is not None else []
        if not msgs or msgs[-1].id != message_id or msgs[-1].role != "assistant":
            self._notify("Only the last answer can be regenerated or continued")
            return None
        return msgs[-1]

    def regenerate(self, message_id: int) -> None:
        """Answer the same conversation again as a new version of the last answer; the earlier
        versions stay, browsable with "‹ 1/2 ›" under it."""
        if not self._can_generate() or self._last_answer(message_id) is None:
            return
        cid = self._conversation()
        prior = self._conversation_chat(before=message_id)
        asked = self._ask_library(prior[0], prior[0][-1]["content"]) if prior and prior[0] else None
        fit = self._fit_to_context(asked[0], pictures.kept(prior[1], 0)) if asked is not None and prior else None
        if fit is None or prior is None:
            return
        chat = [m for m in fit.messages if m["role"] != "system"]
        sent = pictures.kept(prior[1], fit.dropped)
        try:
            answer = self._history.new_version(message_id)
        except HistoryError:  # the window has said so; the answer shown stays as it was
            return
        self._view.transcript.set_messages([m for m in self._history.messages(cid) if m.id != message_id])
        self._show_context_note(fit.note)
        self._view.auto_note.hide()
        self.remember_settings(cid)
        self._stream.start(chat, answer, sources=asked[1], images=sent)

    def show_version(self, message_id: int, step: int) -> None:
        """Show the answer's (or an edited question's) previous (-1) or next (+1) version: the
        chat, its export and the next question use the chosen one; a question's version comes
        with the conversation that followed it."""
        transcript = self._view.transcript
        m = transcript.message(message_id)
        if m is None or not 1 <= m.version + step <= m.versions:
            return
        try:
            if m.role == "user":
                chosen = choose_question(self._history, message_id, m.version + step)
            else:
                chosen = self._history.choose_version(message_id, m.version + step)
        except (HistoryError, KeyError) as e:
            self._notify(str(e))
            return
        msgs = self._history.messages(chosen.conversation_id)
        if m.role == "user":
            transcript.set_messages(msgs)
        else:
            transcript.show_in_place(msgs)
        self._view.stats_label.setText(last_answer_stats(msgs))  # the version shown's figures, or none
        self._notify(f"Version {chosen.version} of {chosen.versions} of your message" if m.role == "user"
                     else f"Answer {chosen.version} of {chosen.versions}")

    def continue_answer(self, message_id: int) -> None:
        """Generate more of a stopped answer and append it: the prompt is the conversation with
        the partial answer as the open assistant turn (engine.decoding.prompting.chat.continuation_tokens)."""
        if not self._can_generate():
            return
        last = self._last_answer(message_id)
        if last is None or not last.content:
            return
        from engine.decoding.prompting.chat import chat_tokens, continuation_tokens
        from engine.errors import TandemError

        msgs = self._history.messages(self._conversation())
        read = self._conversation_chat(before=message_id + 1)  # every message, with its pictures
        if read is None:
            return
        chat, images = read[0], pictures.kept(read[1], 0)
        sources = answer_sources(last)
        question = next((i for i in range(len(chat) - 2, -1, -1) if chat[i]["role"] == "user"), None)
        if sources and question is not None:  # a Library answer goes on from the passages it was given
            chat[question] = {"role": "user", "content": LibraryAsk.prompt_again(chat[question]["content"], sources)}
        system = self._settings.system_prompt()
        if system:
            chat.insert(0, {"role": "system", "content": system})
        target = self._session.engine.target
        try:  # with pictures: their markers become the slots the projector fills (as continuation_tokens, media on)
            tokens = continuation_tokens(target, chat) if not images else \
                chat_tokens(target, chat[:-1], media=True) + target.tokenize(last.content, add_special=False)
        except TandemError as e:
            self._fail(str(e))
            return
        self._view.transcript.set_messages(msgs[:-1])
        self.remember_settings(last.conversation_id)
        self._stream.start(tokens, last, chat=False, continuing=True, sources=sources or None, images=images)

    # -- Edit ---------------------------------------------------------------------------------
    def edit_message(self, message_id: int) -> None:
        """Put a user message in the prompt box, its files back as chips; Send makes the new text
        a version of it and answers it, the earlier version keeping what followed it."""
        v, cid = self._view, self._conversation()
        m = v.transcript.message(message_id)
        if m is None or m.role != "user" or cid is None:
            return
        self.editing = (cid, message_id)
        typed, files = split_attachments(m.content, m.spans)
        v.attachments.clear()
        for name, text in files:
            v.attachments.add(Attachment(name, text, *v.counter.count(text)))
        for image in pictures.stored_attachments(self._history, m):
            v.attachments.add_image(image)
        v.prompt.setPlainText(typed)
        v.edit_label.show()
        v.prompt.setFocus()

    def cancel_edit(self) -> None:
        self.editing = None
        self._view.edit_label.hide()
        self._view.prompt.clear()
        self._view.attachments.clear()  # the edited message's files went back as chips

    def conversation_changed(self) -> None:
        """Another conversation opened: an edit of this one no longer applies."""
        if self.editing is not None and self.editing[0] != self._conversation():
            self.editing = None
            self._view.edit_label.hide()

    def _store_edit(self, cid: int, content: str, parts: list[tuple[int, str]]) -> bool:
        """Send of an edit in `cid`: the new text becomes a version of the edited message; the
        earlier one keeps what followed it ("‹ 1/2 ›" under the message). False: not editing."""
        editing, self.editing = self.editing, None
        self._view.edit_label.hide()
        if editing is None or editing[0] != cid:
            return False
        edit_question(self._history, editing[1], content, parts)
        return True
