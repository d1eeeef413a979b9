"""The chat page's widgets, built once: the conversation list (left) and the transcript with
the prompt under it (middle); the drawer's settings and charts are app/views/chat/settings_panel.py."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QListWidget, QMenu, QPushButton, QVBoxLayout, QWidget

from ...widgets.attachments.attachments import AttachmentChips, FileDropFilter, PromptEdit
from ...widgets.controls.live_label import LiveLabel
from ...widgets.panels.model_bar import ModelBar
from ...widgets.transcript.provenance import Legend
from ...widgets.controls.token_meter import TokenMeter
from ...widgets.transcript.transcript import Transcript


class LayoutMixin:
    """Builds ChatView's widgets; the page gives them to the objects that act on them."""

    def _build_conversations(self) -> QWidget:
        """Search, the chat list, New chat and More."""
        left = QWidget()
        ll = QVBoxLayout(left)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search chats (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.refresh_conversations)
        self.conv_list = QListWidget()
        self.conv_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.conv_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.conv_list.currentItemChanged.connect(self._conversation_selected)
        self.conv_list.itemClicked.connect(self._conversation_clicked)
        self.conv_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.conv_list.customContextMenuRequested.connect(self._conversation_menu)
        btns = QHBoxLayout()
        self.new_btn = QPushButton("New chat")
        self.new_btn.setToolTip("New chat (Ctrl+N)")
        self.new_btn.clicked.connect(self.new_conversation)
        self.more_btn = QPushButton("More")
        self.more_btn.setToolTip("Rename, delete or export the open chat (also: right-click a chat)")
        self.more_btn.setMenu(self._conversation_actions(QMenu(self.more_btn)))
        for button in (self.new_btn, self.more_btn):
            button.setMinimumWidth(button.sizeHint().width())  # the list narrows, its buttons never clip
        btns.addWidget(self.new_btn, 1)
        btns.addWidget(self.more_btn)
        ll.addWidget(self.search)
        ll.addWidget(self.conv_list, 1)
        ll.addLayout(btns)
        return left

    def _build_transcript(self) -> None:
        """The transcript and the notes under it (stats, Auto, context, prefill, editing)."""
        self.legend = Legend()
        self.legend.toggled.connect(lambda on: self.transcript.set_show_provenance(on))
        self.transcript = Transcript()
        self.transcript.count_tokens = self.counter.count
        self.transcript.notice.connect(self.message)
        # Rewritten 4 times a second while streaming: a LiveLabel repaints itself without a
        # relayout of the panes; a long line wraps instead of widening the window.
        self.stats_label = LiveLabel("")
        self.stats_label.setObjectName("answerStats")
        self.prefill_label = QLabel("")
        self.prefill_label.hide()
        self.edit_label = QLabel("Editing a message: Send answers the new text and keeps the earlier version (‹ ›). "
                                 "<a href='cancel'>Cancel edit</a>")
        self.edit_label.setObjectName("editNotice")
        self.edit_label.setWordWrap(True)
        self.edit_label.hide()
        self.auto_note = QLabel("")  # why Auto drafted nothing in the last answer (numbers on hover)
        self.auto_note.setObjectName("autoNote")
        self.context_note = QLabel("")  # earlier messages left out to fit the context
        self.context_note.setObjectName("contextNote")
        for note in (self.auto_note, self.context_note):
            note.setWordWrap(True)
            note.hide()
            note.setStyleSheet("font-style: italic;")

    def _build_prompt(self) -> None:
        """The prompt box, its attachments and token meter, and the buttons under it."""
        self.attachments = AttachmentChips()
        self.attachments.changed.connect(self._schedule_meter)
        self.prompt = PromptEdit()
        self.prompt.filesArrived.connect(self.attach_files)
        self.prompt.textChanged.connect(self._schedule_meter)
        self._drop_filter = FileDropFilter(self.attach_files, self)
        self.transcript.setAcceptDrops(True)
        self.transcript.viewport().setAcceptDrops(True)
        self.transcript.viewport().installEventFilter(self._drop_filter)
        self.reading_label = QLabel("")  # "Reading notes.pdf…" while attached files are read
        self.reading_label.setObjectName("readingNote")
        self.reading_label.setWordWrap(True)
        self.reading_label.hide()
        self.meter = TokenMeter(self._measure_prompt)
        self.prompt.setPlaceholderText("Ask something…  (Ctrl+Enter to send, Esc to stop)")
        self.prompt.setMaximumHeight(120)
        self.attach_btn = QPushButton("Attach file…")
        self.attach_btn.setToolTip("Add documents (PDF, Word, spreadsheets, slides, web pages, EPUB, RTF) or text files "
                                   "as context (or drop them on the chat, or paste copied files). Ctrl+O")
        self.attach_btn.clicked.connect(self.choose_attachments)  # no-argument slot: clicked(bool) is not a path
        self.export_btn = QPushButton("Export…")
        self.export_btn.setToolTip("Save the conversation or the last answer as Markdown, Word, PDF or HTML (Ctrl+E)")
        menu = self.export_menu = QMenu(self.export_btn)
        menu.addAction("Whole conversation (Markdown, Word, PDF, HTML)…", lambda: self.export_conversation())
        menu.addAction("Last answer (Markdown, Word, PDF, HTML)…", lambda: self.export_answer())
        menu.addSeparator()
        menu.addAction("Copy the answer for Word or mail", lambda: self.copy_last_answer())
        self.export_btn.setMenu(menu)
        self.copy_btn = QPushButton("Copy answer")
        self.copy_btn.setToolTip("Copy the last answer as rich text (headings, tables, code) and as plain text "
                                 "(Ctrl+Shift+C)")
        self.copy_btn.clicked.connect(self.copy_last_answer)
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.clicked.connect(self.stop)
        self.send_btn = QPushButton("Send")
        self.send_btn.setDefault(True)
        self.send_btn.clicked.connect(self.send)

    def _build_answer_column(self) -> QWidget:
        """The middle column: model bar, legend, transcript, notes, prompt, buttons."""
        self.model_bar = ModelBar(self.session)
        self._build_transcript()
        self._build_prompt()
        mid = self._answer_column = QWidget()
        ml = QVBoxLayout(mid)
        bar = QHBoxLayout()  # "Chats" opens the conversation list where it floats (drawer.py)
        bar.addWidget(self.chats_btn)
        bar.addWidget(self.model_bar, 1)
        ml.addLayout(bar)
        ml.addWidget(self.legend)
        ml.addWidget(self.transcript, 1)
        for w in (self.stats_label, self.auto_note, self.context_note, self.prefill_label, self.edit_label,
                  self.reading_label, self.prompt):
            ml.addWidget(w)
        under_prompt = QHBoxLayout()  # attachment chips, then the token meter at the right
        under_prompt.addWidget(self.attachments, 1)
        under_prompt.addStretch(0)
        under_prompt.addWidget(self.meter)
        ml.addLayout(under_prompt)
        row = QHBoxLayout()
        for w in (self.attach_btn, self.export_btn, self.copy_btn):
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.stop_btn)
        row.addWidget(self.send_btn)
        ml.addLayout(row)
        return mid
