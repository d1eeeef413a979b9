"""Chat: conversations (SQLite), streaming answers with provenance colours, the lookahead
slider and Auto switch, sampling settings, live charts, per-answer stats, attachments and
Markdown export.

The page builds its widgets (layout.py, drawer.py) and owns the objects that act on them:
`asking` (asking.py: Send, Edit, Regenerate, Continue, answer versions), `stream`
(answering.py: the answer being written, from the worker to the saved message) and
`settings_panel` (settings_panel.py: the generation settings and live charts). The
conversation list (conversations.py) and the composer (composer.py) are the page's own
behaviour; they read the page's attributes and properties below, never another part's state.
"""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QWidget

from ...history import History, message_markdown
from ...session import Session
from ...widgets.attachments.attachments import Attachment, compose
from ...widgets.controls.escape import close_topmost
from ...widgets.controls.token_meter import TokenCounter
from ... import workers
from .answering import AnswerStream, AnswerView
from .asking import Asking, AskView
from .composer import ComposerMixin
from .conversations import ConversationsMixin
from .drawer import DrawerMixin
from .layout import LayoutMixin
from .settings_panel import SettingsPanel


class ChatView(LayoutMixin, DrawerMixin, ConversationsMixin, ComposerMixin, QWidget):
    message = Signal(str)  # a one-line notice for the status bar
    error = Signal(str)

    def __init__(self, session: Session, history: History, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.history = history
        history.on_write_error = self.error.emit  # a failed save is shown in this window, not only on stderr
        self.conversation_id: int | None = None  # the open conversation (None: a new chat)
        self._drafts: dict[int | None, str] = {}  # unsent prompts of the other conversations (None: a new chat)
        self._pending_files: dict[int | None, list[Attachment]] = {}  # and their attached files, not yet sent
        self._opening = False  # a chat's stored settings are going into the controls (not an edit)
        self.counter = TokenCounter(lambda: self.session.engine)
        self._readers: list = []  # batches of attached files being read on worker threads (composer.py)
        self._attaching = False  # composer.py is attaching what was read (a section picker may be open)
        self._count_lock = threading.Lock()  # a reading worker's token count vs the model being closed
        self._closing_engine: object = None
        session.engineClosing.connect(self._engine_closing)
        self._build()
        panel = self.settings_panel
        # the settings' controls, as the page's own (the main window and the tests reach them here)
        self.drafter, self.lookahead, self.charts_toggle, self.charts = (
            panel.drafter, panel.lookahead, panel.charts_toggle, panel.charts)
        self.temperature, self.top_p, self.seed, self.max_tokens, self.system = (
            panel.temperature, panel.top_p, panel.seed, panel.max_tokens, panel.system)
        self.stream = AnswerStream(
            session, history, panel, self.model_bar,
            AnswerView(self.transcript, self.stats_label, self.prefill_label, self.auto_note, self.meter,
                       self.send_btn, self.stop_btn),
            self.message.emit, self.error.emit, parent=self)
        self.asking = Asking(
            session, history, self.stream, panel,
            AskView(self.prompt, self.attachments, self.transcript, self.stats_label, self.auto_note,
                    self.context_note, self.edit_label, self.counter),
            lambda: self.conversation_id, self.message.emit, self.error.emit, parent=self)
        self.asking.conversationStarted.connect(self._conversation_started)
        self.stream.saved.connect(self.refresh_conversations)
        self.conv_list.currentItemChanged.connect(lambda *_: self.asking.conversation_changed())
        panel.lookahead.changed.connect(self.stream.set_lookahead)
        panel.edited.connect(self._settings_edited)
        panel.notice.connect(self.message)
        panel.max_tokens.valueChanged.connect(self._schedule_meter)
        panel.system.textChanged.connect(self._schedule_meter)
        self.refresh_conversations()
        session.pairChanged.connect(self._model_changed)
        self.stream.sync_buttons()
        self.meter.update_now()

    def _build(self) -> None:
        """Conversations | transcript and prompt | the settings drawer, in a splitter."""
        root = QHBoxLayout(self)
        split = QSplitter(Qt.Orientation.Horizontal)
        root.addWidget(split)
        split.addWidget(self._conversations_dock(self._build_conversations()))
        split.addWidget(self._build_answer_column())
        self.settings_panel = SettingsPanel(self.model_bar.draft)  # one drafter control: the model bar's Draft box
        split.addWidget(self._drawer(self.settings_panel))
        split.setSizes([200, 640, 420])
        split.setStretchFactor(1, 1)
        split.setCollapsible(1, False)
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.send).setWhatsThis("Send the message")
        QShortcut(QKeySequence("Ctrl+Enter"), self, activated=self.send).setWhatsThis("Send the message (keypad Enter)")
        QShortcut(QKeySequence("Escape"), self, activated=self.escape).setWhatsThis(
            "Close the dialog on top; with none open, stop the answer being generated")
        for keys, slot, what in (
                ("Ctrl+R", lambda: self.act_on_last_answer("regenerate"), "Regenerate the last answer (a new version)"),
                ("Ctrl+Shift+Return", lambda: self.act_on_last_answer("continue"), "Continue a stopped answer"),
                ("Ctrl+Shift+C", self.copy_last_answer, "Copy the last answer (rich text and plain text)"),
                ("Ctrl+O", self.choose_attachments, "Attach documents or text files"),
                ("Ctrl+E", self.show_export_menu, "Export the conversation or the last answer"),
                ("Ctrl+F", self.focus_search, "Search the conversations")):
            QShortcut(QKeySequence(keys), self, activated=slot).setWhatsThis(what)

    # -- what the main window and the tests ask of the page ---------------------------------
    def send(self) -> None:
        if self.reading:  # the message would go without the file being read
            self.message.emit(f"{self.reading_label.text()} Send again once it is attached")
            return
        self.asking.send()

    def stop(self) -> None:
        self.stream.stop()

    def act_on_last_answer(self, action: str) -> None:
        """Regenerate or Continue from the keyboard: what the links under the last answer do."""
        answer = self.transcript.last_answer_id()
        if answer is None:
            self.message.emit("No answer to " + action + " yet")
            return
        self.asking.act(action, answer)

    def show_export_menu(self) -> None:
        self.export_btn.showMenu()

    def focus_search(self) -> None:
        """Ctrl+F: the conversation search, the list opened first where it floats (narrow windows)."""
        if not self.search.isVisible() and self.chats_btn.isVisible():
            self.chats_btn.click()
        self.search.setFocus()
        self.search.selectAll()

    def escape(self) -> None:
        """Esc: close the dialog or viewer on top if one is open (it was what Esc was pressed
        for), else stop the answer."""
        if not close_topmost(self):
            self.stop()

    def shutdown(self) -> None:
        """The window is closing: stop and keep whatever was written."""
        self.stop_reading()
        self.stream.shutdown()

    @property
    def answering(self) -> bool:
        """An answer is being written (closing the window would stop it)."""
        return self.stream.running

    @property
    def worker(self) -> workers.GenerationWorker | None:
        """The answer being written, if any."""
        return self.stream.worker

    def draft_spec(self) -> Any:
        """What the next answer drafts with (the Draft box's choice for the loaded pair)."""
        return self.stream.draft_spec()

    def set_charts_visible(self, on: bool) -> None:
        self.settings_panel.set_charts_visible(on)

    def settings(self) -> dict[str, Any]:
        """The generation settings (the main window stores them in QSettings)."""
        return self.settings_panel.values()

    def apply_settings(self, s: dict[str, Any]) -> None:
        self.settings_panel.apply(s)

    def _settings_edited(self) -> None:
        """A setting changed in an open chat: it is the chat's own at once, not only at its next
        Send (a lookahead set and not yet used was lost on switching chats)."""
        if self.conversation_id is not None and not self._opening:
            self.asking.remember_settings(self.conversation_id, answering=False)

    def _conversation_started(self, conversation_id: int) -> None:
        """Send created a conversation for its question: it is the open one, in the list."""
        self.conversation_id = conversation_id
        self.refresh_conversations()

    def _compose(self, text: str) -> str:
        """The user's message as stored and sent: the typed text, then each attachment."""
        return compose(text, self.attachments.items())[0]

    def answer_markdown(self) -> str:
        """The open conversation's last answer as Markdown ("" when there is none)."""
        if self.conversation_id is None:
            return ""
        last = next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)
        return message_markdown(last) if last else ""
