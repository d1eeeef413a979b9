"""The chat page's two columns of widgets, built once: the conversation list (left) and the
transcript with the prompt under it (middle); the drawer's settings and charts are
settings_panel.py. Each column only builds and lays out: the page connects its parts to the
objects that act on them."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox, QHBoxLayout, QLabel, QLineEdit, QListWidget, QMenu, QPushButton, QToolButton, QVBoxLayout, QWidget,
)

from ...session import Session
from ...widgets.attachments.attachments import AttachmentChips, FileDropFilter, PromptEdit
from ...widgets.controls.live_label import LiveLabel
from ...widgets.controls.token_meter import TokenCounter, TokenMeter
from ...widgets.panels.model_bar import ModelBar
from ...widgets.transcript.provenance import Legend
from ...widgets.transcript.transcript import Transcript


class ConversationColumn(QWidget):
    """Search, the folder shown (hidden while no chat is in a folder), the chat list, New chat
    and More (the folder box and the menu are filled by conversations.py)."""

    def __init__(self) -> None:
        super().__init__()
        ll = QVBoxLayout(self)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search chats (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.folder = QComboBox()
        self.folder.setToolTip("Show the chats of one folder (file a chat in one: right-click it, Move to folder)")
        self.folder.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.folder.setMinimumContentsLength(8)
        self.folder.hide()
        self.conv_list = QListWidget()
        self.conv_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.conv_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.conv_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        btns = QHBoxLayout()
        self.new_btn = QPushButton("New chat")
        self.new_btn.setToolTip("New chat (Ctrl+N)")
        self.more_btn = QPushButton("More")
        self.more_btn.setToolTip("Rename, pin, file, export or delete the open chat (also: right-click a chat)")
        self.more_btn.setMenu(QMenu(self.more_btn))
        for button in (self.new_btn, self.more_btn):
            button.setMinimumWidth(button.sizeHint().width())  # the list narrows, its buttons never clip
        btns.addWidget(self.new_btn, 1)
        btns.addWidget(self.more_btn)
        ll.addWidget(self.search)
        ll.addWidget(self.folder)
        ll.addWidget(self.conv_list, 1)
        ll.addLayout(btns)


class AnswerColumn(QWidget):
    """The middle column: the model bar, legend, transcript, the notes under it (stats, Auto,
    context, prefill, editing, reading), the prompt with its chips and token meter, and the
    buttons. `chats_btn` (drawer.py's) sits at the bar's left; `measure` is what the token
    meter counts (composer.py)."""

    filesDropped = Signal(list)  # paths dropped on the transcript or pasted into the prompt
    imagesDropped = Signal(list)  # [(name, bytes)]: a picture pasted (a screenshot) or dropped from a program

    def __init__(self, session: Session, counter: TokenCounter, chats_btn: QToolButton,
                 measure: Callable[[], tuple[int, bool, int]]) -> None:
        super().__init__()
        self.model_bar = ModelBar(session)
        self._build_transcript(counter)
        self._build_prompt(measure)
        ml = QVBoxLayout(self)
        bar = QHBoxLayout()  # "Chats" opens the conversation list where it floats (drawer.py)
        bar.addWidget(chats_btn)
        bar.addWidget(self.model_bar, 1)
        ml.addLayout(bar)
        ml.addWidget(self.legend)
        ml.addWidget(self.transcript, 1)
        for w in (self.stats_label, self.auto_note, self.context_note, self.prefill_label, self.edit_label,
                  self.reading_label, self.prompt):
            ml.addWidget(w)
        under_prompt = QHBoxLayout()  # the Library folder asked, attachment chips, the token meter at the right
        under_prompt.addWidget(self.library_box)
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

    def _build_transcript(self, counter: TokenCounter) -> None:
        """The transcript and the notes under it (stats, Auto, context, prefill, editing)."""
        self.legend = Legend()
        self.legend.toggled.connect(lambda on: self.transcript.set_show_provenance(on))
        self.transcript = Transcript()
        self.transcript.count_tokens = counter.count
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

    def _build_prompt(self, measure: Callable[[], tuple[int, bool, int]]) -> None:
        """The prompt box, its attachments and token meter, and the buttons under it."""
        self.attachments = AttachmentChips()
        self.prompt = PromptEdit()
        self.prompt.filesArrived.connect(self.filesDropped)
        self.prompt.imagesArrived.connect(self.imagesDropped)
        self._drop_filter = FileDropFilter(self.filesDropped.emit, self, on_images=self.imagesDropped.emit)
        self.transcript.setAcceptDrops(True)
        self.transcript.viewport().setAcceptDrops(True)
        self.transcript.viewport().installEventFilter(self._drop_filter)
        self.reading_label = QLabel("")  # "Reading notes.pdf…" while attached files are read
        self.reading_label.setObjectName("readingNote")
        self.reading_label.setWordWrap(True)
        self.reading_label.hide()
        self.meter = TokenMeter(measure)
        self.prompt.setPlaceholderText("Ask something…  (Ctrl+Enter to send, Esc to stop)")
        self.prompt.setMaximumHeight(120)
        self.attach_btn = QPushButton("Attach file…")
        self.attach_btn.setToolTip("Add documents (PDF, Word, spreadsheets, slides, web pages, EPUB, RTF) or text files "
                                   "as context, or pictures (PNG, JPEG, WebP) for a model that sees (or drop them on "
                                   "the chat, or paste copied files or a screenshot). Ctrl+O")
        self.export_btn = QPushButton("Export…")
        self.export_btn.setToolTip("Save the conversation or the last answer as Markdown, Word, PDF or HTML (Ctrl+E)")
        self.export_menu = QMenu(self.export_btn)
        self.export_btn.setMenu(self.export_menu)
        self.library_box = QComboBox()  # the Library folder this chat asks (library_ask.py fills it)
        self.library_box.setObjectName("libraryChoice")
        self.library_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.library_box.setMinimumContentsLength(8)
        self.copy_btn = QPushButton("Copy answer")
        self.copy_btn.setToolTip("Copy the last answer as rich text (headings, tables, code) and as plain text "
                                 "(Ctrl+Shift+C)")
        self.stop_btn = QPushButton("Stop")
        self.send_btn = QPushButton("Send")
        self.send_btn.setDefault(True)
