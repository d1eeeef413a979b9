"""Chat: conversations (SQLite), streaming answers with provenance colours, the lookahead
slider and Auto switch, sampling settings, live charts, per-answer stats, attachments and
Markdown export.

The page builds its two columns (layout.py) and the settings panel, and owns the objects
that act on them, each told what it needs when it is made: `sides` (drawer.py: the settings
drawer and the conversation list's dock, floating in a narrow window), `conversations`
(conversations.py: the chat list), `composer` (composer.py: attachments, token meter,
unsent drafts, export, copy), `asking` (asking.py: Send, Edit, Regenerate, Continue, answer
versions), `stream` (answering.py: the answer being written, from the worker to the saved
message), `keeping` (keeping.py: export all and import, delete a message, fork a chat),
`library` (library_ask.py: the Library folder the chat asks, its sources opened in the side
pane) and `settings_panel` (settings_panel.py: the generation settings and live charts).
Opening a chat, which touches most of them, is the page's own. The columns' widgets are
the page's attributes too (the main window and the tests reach them there).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QWidget

from ...history import HistoryError, History, message_markdown
from ...history.settings import chat_settings
from ...library_shelf import LibraryShelf
from ...session import Session
from ...widgets.panels.source_pane import SourcePane
from ...tool_servers import ToolServers
from ...widgets.controls.escape import close_topmost
from ...widgets.controls.token_meter import TokenCounter
from ... import workers
from .answering import AnswerStream, AnswerView
from .asking import Asking, AskView
from .composer import Composer
from .conversations import ConversationList
from .drawer import SidePanels
from .keeping import ChatKeeping
from .library_ask import SETTING as LIBRARY_SETTING, LibraryAsk
from .format import last_answer_stats
from .layout import AnswerColumn, ConversationColumn
from .settings_panel import SettingsPanel
from .tool_calls import ChatTools


class ChatView(QWidget):
    message = Signal(str)  # a one-line notice for the status bar
    error = Signal(str)

    def __init__(self, session: Session, history: History, parent: QWidget | None = None, *,
                 shelf: LibraryShelf | None = None, tool_servers: ToolServers | None = None):
        super().__init__(parent)
        self.shelf = shelf  # the Library's folders (app/library_shelf.py), asked from this page
        self.session = session
        self.history = history
        history.on_write_error = self.error.emit  # a failed save is shown in this window, not only on stderr
        self.conversation_id: int | None = None  # the open conversation (None: a new chat)
        self._opening = False  # a chat's stored settings are going into the controls (not an edit)
        self.counter = TokenCounter(lambda: self.session.engine)
        self._build()
        panel = self.settings_panel
        # the settings' controls, as the page's own (the main window and the tests reach them here)
        self.drafter, self.lookahead, self.charts_toggle, self.charts = (
            panel.drafter, panel.lookahead, panel.charts_toggle, panel.charts)
        self.temperature, self.top_p, self.seed, self.max_tokens, self.system = (
            panel.temperature, panel.top_p, panel.seed, panel.max_tokens, panel.system)
        self.top_k, self.min_p, self.repeat_penalty, self.stop_strings = (
            panel.top_k, panel.min_p, panel.repeat_penalty, panel.stop)
        self.composer = Composer(session, history, self.counter, self.answer_column, panel, self,
                                 conversation=lambda: self.conversation_id, answering=lambda: self.worker is not None,
                                 notify=self.message.emit, fail=self.error.emit)
        self.tools = ChatTools(tool_servers or ToolServers(), panel.tools, self, stop=self.stop, parent=self)
        self.stream = AnswerStream(
            session, history, panel, self.model_bar,
            AnswerView(self.transcript, self.stats_label, self.prefill_label, self.auto_note, self.meter,
                       self.send_btn, self.stop_btn),
            self.message.emit, self.error.emit, tools=self.tools, parent=self)
        self.library = LibraryAsk(shelf, self.library_box, self.source_pane, self.transcript, self.message.emit,
                                  self.error.emit, parent=self)
        self.library.edited.connect(self._settings_edited)
        self.asking = Asking(
            session, history, self.stream, panel,
            AskView(self.prompt, self.attachments, self.transcript, self.stats_label, self.auto_note,
                    self.context_note, self.edit_label, self.counter),
            lambda: self.conversation_id, self.message.emit, self.error.emit, parent=self, library=self.library)
        self.conversations = ConversationList(
            history, self.conversation_column, self, current=lambda: self.conversation_id,
            busy=lambda: self.worker is not None, export=self.export_conversation, notify=self.message.emit)
        self.keeping = ChatKeeping(history, self, busy=lambda: self.worker is not None, notify=self.message.emit,
                                   fail=self.error.emit)
        self.transcript.messageAction.connect(self.keeping.act)
        self.keeping.changed.connect(self.refresh_conversations)
        self.keeping.reopen.connect(self._reopen)
        self.conversations.chosen.connect(self._conversation_chosen)
        self.conversations.deleted.connect(self._conversation_deleted)
        self.asking.conversationStarted.connect(self._conversation_started)
        self.stream.saved.connect(self.refresh_conversations)
        self.conv_list.currentItemChanged.connect(lambda *_: self.asking.conversation_changed())
        panel.lookahead.changed.connect(self.stream.set_lookahead)
        panel.edited.connect(self._settings_edited)
        panel.notice.connect(self.message)
        panel.attention.connect(self._show_setting)
        self._connect_buttons()
        self.refresh_conversations()
        self.stream.sync_buttons()
        self.meter.update_now()

    def _build(self) -> None:
        """Conversations | transcript and prompt | the settings drawer, in a splitter."""
        root = QHBoxLayout(self)
        split = QSplitter(Qt.Orientation.Horizontal)
        root.addWidget(split)
        self.sides = SidePanels(self)
        self.conversation_column = ConversationColumn()
        split.addWidget(self.sides.dock_conversations(self.conversation_column))
        self.answer_column = AnswerColumn(self.session, self.counter, self.sides.chats_btn,
                                          lambda: self.composer.measure_prompt())
        middle = QSplitter(Qt.Orientation.Horizontal)  # the transcript, and a Library source's passage beside it
        middle.setChildrenCollapsible(False)
        middle.addWidget(self.answer_column)
        self.source_pane = SourcePane()
        middle.addWidget(self.sides.dock_source(self.source_pane))
        middle.setStretchFactor(0, 3)
        middle.setStretchFactor(1, 1)
        split.addWidget(middle)
        c = self.conversation_column
        self.search, self.folder, self.conv_list, self.new_btn, self.more_btn = (
            c.search, c.folder, c.conv_list, c.new_btn, c.more_btn)
        a = self.answer_column
        self.model_bar, self.legend, self.transcript, self.stats_label, self.prefill_label = (
            a.model_bar, a.legend, a.transcript, a.stats_label, a.prefill_label)
        self.edit_label, self.auto_note, self.context_note, self.reading_label = (
            a.edit_label, a.auto_note, a.context_note, a.reading_label)
        self.prompt, self.attachments, self.meter, self.library_box = a.prompt, a.attachments, a.meter, a.library_box
        self.attach_btn, self.export_btn, self.export_menu, self.copy_btn, self.stop_btn, self.send_btn = (
            a.attach_btn, a.export_btn, a.export_menu, a.copy_btn, a.stop_btn, a.send_btn)
        self.settings_panel = SettingsPanel(self.model_bar.draft)  # one drafter control: the model bar's Draft box
        split.addWidget(self.sides.add_drawer(self.settings_panel, beside=self.answer_column))
        self.chats_btn, self.drawer_btn = self.sides.chats_btn, self.sides.drawer_btn
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

    def _connect_buttons(self) -> None:
        """The columns' buttons and the transcript's notices, to the parts that act on them."""
        self.transcript.notice.connect(self.message)
        self.new_btn.clicked.connect(self.new_conversation)
        self.attach_btn.clicked.connect(self.choose_attachments)  # no-argument slot: clicked(bool) is not a path
        menu = self.export_menu
        menu.addAction("Whole conversation (Markdown, Word, PDF, HTML, JSON)…", lambda: self.export_conversation())
        menu.addAction("Last answer (Markdown, Word, PDF, HTML)…", lambda: self.export_answer())
        menu.addSeparator()
        menu.addAction("Copy the answer for Word or mail", lambda: self.copy_last_answer())
        self.copy_btn.clicked.connect(self.copy_last_answer)
        self.stop_btn.clicked.connect(self.stop)
        self.send_btn.clicked.connect(self.send)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.sides.resized()

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
        self.tools.shutdown()

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

    def set_dark(self, dark: bool) -> None:
        """The main window's scheme change, for what the page colours itself."""
        self.settings_panel.advanced.set_dark(dark)

    def settings(self) -> dict[str, Any]:
        """The generation settings (the main window stores them in QSettings; a chat's tools stay its own)."""
        return self.settings_panel.values(tools=False)

    def apply_settings(self, s: dict[str, Any]) -> None:
        self.settings_panel.apply(s)

    def _settings_edited(self) -> None:
        """A setting changed in an open chat: it is the chat's own at once, not only at its next
        Send (a lookahead set and not yet used was lost on switching chats)."""
        if self.conversation_id is not None and not self._opening:
            self.asking.remember_settings(self.conversation_id, answering=False)

    def _show_setting(self, widget: QWidget) -> None:
        """A setting must be seen (why it cannot be used): the drawer opened, scrolled to it."""
        if not self.sides.drawer_open:
            self.sides.drawer_clicked(True)
        self.sides.drawer_scroll.ensureWidgetVisible(widget)

    def _conversation_started(self, conversation_id: int) -> None:
        """Send created a conversation for its question: it is the open one, in the list."""
        self.conversation_id = conversation_id
        self.refresh_conversations()


    def answer_markdown(self) -> str:
        """The open conversation's last answer as Markdown ("" when there is none)."""
        if self.conversation_id is None:
            return ""
        last = next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)
        return message_markdown(last) if last else ""

    # -- the open conversation -------------------------------------------------------------
    def refresh_conversations(self) -> None:
        self.conversations.refresh()

    def _conversation_chosen(self, conversation_id: int) -> None:
        """A chat picked in the list (conversations.py): opened, the floating list out of the way."""
        self.charts.reset()  # step data is not stored: the charts show only a live answer
        self.open_conversation(conversation_id)
        self.sides.close_floating_chats()

    def _reopen(self, conversation_id: int) -> None:
        """A chat changed under the transcript (a message deleted) or was made (a fork): shown.
        An edit in progress of a message that is gone (or of the chat left for a fork) ends."""
        self.charts.reset()
        self.open_conversation(conversation_id)
        self.refresh_conversations()
        editing = self.asking.editing
        if editing is not None and editing[0] == conversation_id and \
                all(m.id != editing[1] for m in self.history.messages(conversation_id)):
            self.asking.cancel_edit()
        self.asking.conversation_changed()

    def _conversation_deleted(self, _conversation_id: int) -> None:
        self.asking.cancel_edit()  # nothing unsent of a deleted chat is kept
        self.new_conversation()

    def _switch_draft(self, to: int | None) -> None:
        """The unsent prompt stays with its chat; an edit in progress is dropped, not kept."""
        self.composer.switch_draft(self.conversation_id, to, keep=self.asking.editing is None)

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id != self.conversation_id:
            self.tools.chat_changed()  # the chat left stops its MCP servers
        self._switch_draft(conversation_id)
        self.conversation_id = conversation_id
        conv = self.history.get(conversation_id)
        saved = chat_settings(self.history, conversation_id)
        if saved is not None:  # the chat's own settings (a chat from before has none: the controls stay)
            self._opening = True
            try:
                self.apply_settings({**saved, "system": conv.system_prompt if conv else ""})
                self.library.set_folder(saved.get(LIBRARY_SETTING))
            finally:
                self._opening = False
        elif conv is not None:
            self.system.setPlainText(conv.system_prompt)
        self.source_pane.hide()  # it showed another chat's source
        if saved is None:
            self.settings_panel.tools.apply(None)  # a chat from before tools: off
        try:
            msgs = self.history.messages(conversation_id)
        except HistoryError as e:  # a damaged page: say so where the conversation would be
            self.transcript.set_messages([])
            self.transcript.setPlainText(f"⚠ This conversation could not be read.\n\n{e}")
            self.stats_label.clear()
            return
        self.transcript.set_messages(msgs)
        self.stats_label.setText(last_answer_stats(msgs))
        self._clear_notes()

    def new_conversation(self) -> None:
        if self.worker is not None:
            return
        self._switch_draft(None)
        self.tools.chat_changed()
        self.conversation_id = None
        self.settings_panel.tools.apply(None)  # a new chat starts with its tools off
        self.transcript.set_messages([])
        self.stats_label.clear()
        self._clear_notes()
        self.charts.reset()
        self.conversations.clear_selection()
        self.sides.close_floating_chats()
        self.prompt.setFocus()

    def _clear_notes(self) -> None:
        """Notes about the last answer belong to it: another conversation starts without them
        (the lookahead Auto last used too)."""
        for label in (self.auto_note, self.context_note):
            label.clear()
            label.hide()
        self.lookahead.clear_in_use()
        self.meter.schedule()

    def rename_conversation(self) -> None:
        self.conversations.rename()

    def delete_conversation(self) -> None:
        self.conversations.delete()

    # -- attachments, the meter, export and copy (composer.py) ------------------------------
    def choose_attachments(self) -> None:
        self.composer.choose_attachments()

    def attach_files(self, paths: list[str]) -> None:
        self.composer.attach_files(paths)

    @property
    def reading(self) -> bool:
        """Attached files are still being read (Send waits for them)."""
        return self.composer.reading

    @property
    def section_picker(self) -> Any:
        """The open page picker of a document larger than the context, if any."""
        return self.composer.section_picker

    def stop_reading(self) -> None:
        self.composer.stop_reading()

    def export_conversation(self, path: str | None = None) -> None:
        self.composer.export_conversation(path)

    def export_all(self, path: str | None = None) -> None:
        self.keeping.export_all(path)

    def import_chats(self, path: str | None = None) -> None:
        self.keeping.import_chats(path)

    def export_answer(self, path: str | None = None) -> None:
        self.composer.export_answer(path)

    def copy_last_answer(self) -> None:
        self.composer.copy_last_answer()

    # -- the side panels (drawer.py) --------------------------------------------------------
    @property
    def drawer_open(self) -> bool:
        return self.sides.drawer_open
