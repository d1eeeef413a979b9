"""Chat: conversations (SQLite), streaming answers with provenance colours, the lookahead
slider and Auto switch, sampling settings, live charts, per-answer stats, attachments and
Markdown export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QInputDialog, QLabel,
    QLineEdit, QListWidget, QListWidgetItem, QMenu, QMessageBox, QPlainTextEdit, QPushButton, QSpinBox, QSplitter,
    QVBoxLayout, QWidget,
)
from PySide6.QtWidgets import QScrollArea, QToolButton  # the settings drawer and the chat list's menu

from ..history import History, HistoryError, Message, message_markdown
from ..relative_time import absolute_date, relative_date
from ..session import Session
from ..widgets.attachments import (
    Attachment,
    AttachmentChips,
    AttachmentError,
    FileDropFilter,
    PromptEdit,
    attachment_block,
    read_text_file,
)
from ..widgets.charts import LiveCharts
from ..widgets.live_label import LiveLabel
from ..widgets.live_stats import REFRESH_MS, LiveStats
from ..widgets.lookahead_control import LookaheadControl
from ..widgets.model_bar import ModelBar, draft_model_path
from ..widgets.token_meter import TokenCounter, TokenMeter
from ..widgets.provenance import Legend
from ..widgets.transcript import Transcript, message_text, spans_from_tokens
from .. import workers

DRAWER_OPEN_WIDTH = 1100  # the settings drawer starts closed in a narrower window
DRAWER_MIN_WIDTH = 240  # the drawer scrolls rather than widening the window
DRAWER_OPEN_SIZE = 380  # its width when opened


def stats_text(s: dict[str, Any]) -> str:
    """The engine's one stats wording (engine/measure/report.py), as the CLI prints it."""
    from engine.measure.report import stats_line

    return stats_line(s, " · ", finish=False)


class ChatView(QWidget):
    message = Signal(str)  # a one-line notice for the status bar
    error = Signal(str)

    def __init__(self, session: Session, history: History, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.history = history
        self.conversation_id: int | None = None
        self.worker: workers.GenerationWorker | None = None
        self._stream_tokens: list = []
        self._k_shown: int | None = None  # the lookahead last shown on the slider while streaming
        self._assistant_msg: Message | None = None
        self._editing: tuple[int, int] | None = None  # (conversation, message) that Send replaces
        self._answer_prefix = ""  # Continue: the stored part of the answer being continued
        self.live_stats = LiveStats()
        self.counter = TokenCounter(lambda: self.session.engine)
        self._build()
        self.refresh_conversations()
        session.busyChanged.connect(self._sync_buttons)
        session.pairChanged.connect(self._sync_buttons)
        session.pairChanged.connect(self._model_changed)
        self._sync_buttons()
        self.meter.update_now()

    # -- layout --------------------------------------------------------------------------
    def _build(self) -> None:
        root = QHBoxLayout(self)
        split = QSplitter(Qt.Orientation.Horizontal)
        root.addWidget(split)

        # conversations
        left = QWidget()
        ll = QVBoxLayout(left)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.refresh_conversations)
        self.conv_list = QListWidget()
        self.conv_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.conv_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.conv_list.currentItemChanged.connect(self._conversation_selected)
        self.conv_list.itemClicked.connect(self._conversation_clicked)
        self.conv_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.conv_list.customContextMenuRequested.connect(self._conversation_menu)
        self.conv_list.currentItemChanged.connect(lambda *_: self._drop_edit_notice())
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
        split.addWidget(left)

        # transcript and input
        mid = QWidget()
        ml = QVBoxLayout(mid)
        self.legend = Legend()
        self.legend.toggled.connect(lambda on: self.transcript.set_show_provenance(on))
        self.transcript = Transcript()
        self.transcript.notice.connect(self.message)
        self.transcript.messageAction.connect(self._on_message_action)
        # Rewritten 4 times a second while streaming: a LiveLabel repaints itself without a
        # relayout of the panes; a long line wraps instead of widening the window.
        self.stats_label = LiveLabel("")
        self.stats_label.setObjectName("answerStats")
        self.prefill_label = QLabel("")
        self.prefill_label.hide()
        self.edit_label = QLabel("Editing a message: Send replaces it and drops everything after it. "
                                 "<a href='cancel'>Cancel edit</a>")
        self.edit_label.setObjectName("editNotice")
        self.edit_label.linkActivated.connect(lambda _href: self.cancel_edit())
        self.edit_label.hide()
        self._stats_timer = QTimer(self)
        self._stats_timer.setInterval(REFRESH_MS)
        self._stats_timer.timeout.connect(self._show_live_stats)
        self.auto_note = QLabel("")  # why Auto drafted nothing in the last answer (numbers on hover)
        self.auto_note.setObjectName("autoNote")
        self.auto_note.setWordWrap(True)
        self.auto_note.hide()
        self.context_note = QLabel("")  # earlier messages left out to fit the context
        self.context_note.setObjectName("contextNote")
        self.context_note.setWordWrap(True)
        self.context_note.hide()
        for note in (self.auto_note, self.context_note):
            note.setStyleSheet("font-style: italic;")
        self.model_bar = ModelBar(self.session)
        self.attachments = AttachmentChips()
        self.attachments.changed.connect(self._schedule_meter)
        self.prompt = PromptEdit()
        self.prompt.filesArrived.connect(self.attach_files)
        self.prompt.textChanged.connect(self._schedule_meter)
        self._drop_filter = FileDropFilter(self.attach_files, self)
        self.transcript.setAcceptDrops(True)
        self.transcript.viewport().setAcceptDrops(True)
        self.transcript.viewport().installEventFilter(self._drop_filter)
        self.meter = TokenMeter(self._measure_prompt)
        self.prompt.setPlaceholderText("Ask something…  (Ctrl+Enter to send, Esc to stop)")
        self.prompt.setMaximumHeight(120)
        row = QHBoxLayout()
        self.attach_btn = QPushButton("Attach file…")
        self.attach_btn.setToolTip("Add text files as context (or drop them on the chat, or paste copied files)")
        self.attach_btn.clicked.connect(self.choose_attachments)  # no-argument slot: clicked(bool) is not a path
        self.export_btn = QPushButton("Export…")
        self.export_btn.setToolTip("Save the conversation or the last answer as Markdown")
        menu = QMenu(self.export_btn)
        menu.addAction("Whole conversation…", lambda: self.export_conversation())
        menu.addAction("Last answer…", lambda: self.export_answer())
        self.export_btn.setMenu(menu)
        self.copy_btn = QPushButton("Copy answer")
        self.copy_btn.clicked.connect(self.copy_last_answer)
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.clicked.connect(self.stop)
        self.send_btn = QPushButton("Send")
        self.send_btn.setDefault(True)
        self.send_btn.clicked.connect(self.send)
        for w in (self.attach_btn, self.export_btn, self.copy_btn):
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.stop_btn)
        row.addWidget(self.send_btn)
        ml.addWidget(self.model_bar)
        ml.addWidget(self.legend)
        ml.addWidget(self.transcript, 1)
        ml.addWidget(self.stats_label)
        ml.addWidget(self.auto_note)
        ml.addWidget(self.context_note)
        ml.addWidget(self.prefill_label)
        ml.addWidget(self.edit_label)
        ml.addWidget(self.prompt)
        under_prompt = QHBoxLayout()  # attachment chips, then the token meter at the right
        under_prompt.addWidget(self.attachments, 1)
        under_prompt.addStretch(0)
        under_prompt.addWidget(self.meter)
        ml.addLayout(under_prompt)
        ml.addLayout(row)
        split.addWidget(mid)

        # settings and charts
        right = QWidget()
        rl = QVBoxLayout(right)
        box = QGroupBox("Generation")
        form = QFormLayout(box)
        self.drafter = self.model_bar.draft  # one drafter control: the model bar's Draft box
        self.lookahead = LookaheadControl(value="auto")
        self.lookahead.changed.connect(self._lookahead_changed)
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setToolTip("0 = greedy: speculative output is then identical to the target's own")
        self.top_p = QDoubleSpinBox()
        self.top_p.setRange(0.05, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setValue(1.0)
        self.seed = QSpinBox()
        self.seed.setRange(-1, 2**31 - 1)
        self.seed.setValue(-1)
        self.seed.setSpecialValueText("random")
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(512)
        self.max_tokens.valueChanged.connect(self._schedule_meter)
        self.system = QPlainTextEdit()
        self.system.setPlaceholderText("System prompt (optional)")
        self.system.setMaximumHeight(70)
        self.system.textChanged.connect(self._schedule_meter)
        form.addRow(self.lookahead)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Seed", self.seed)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("System", self.system)
        rl.addWidget(box)
        self.charts_toggle = QCheckBox("Live charts")
        self.charts_toggle.setChecked(True)
        self.charts_toggle.setToolTip("Hidden charts cost no drawing time while an answer streams")
        self.charts_toggle.toggled.connect(self.set_charts_visible)
        self.charts = LiveCharts()
        rl.addWidget(self.charts_toggle)
        rl.addWidget(self.charts, 1)
        split.addWidget(self._drawer(right))
        split.setSizes([200, 640, 420])
        split.setStretchFactor(1, 1)
        split.setCollapsible(1, False)

        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.send).setWhatsThis("Send the message")
        QShortcut(QKeySequence("Ctrl+Enter"), self, activated=self.send).setWhatsThis("Send the message (keypad Enter)")
        QShortcut(QKeySequence("Escape"), self, activated=self.stop).setWhatsThis("Stop the answer being generated")

    # -- the settings drawer (the right-hand panel) ---------------------------------------
    def _drawer(self, panel: QWidget) -> QWidget:
        """The settings and charts in a drawer that a narrow window keeps closed.

        The panel scrolls inside it, so it never sets the window's minimum width; the
        toggle stays visible when it is closed. Until the user opens or closes it, it
        follows the window: open from DRAWER_OPEN_WIDTH px, closed below.
        """
        drawer = self._drawer_widget = QWidget()
        drawer.setObjectName("settingsDrawer")
        lay = QHBoxLayout(drawer)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.drawer_btn = QToolButton()
        self.drawer_btn.setCheckable(True)
        self.drawer_btn.setChecked(True)
        self.drawer_btn.setToolTip("Show or hide the generation settings and live charts (F9)")
        self.drawer_btn.setAutoRaise(True)
        self.drawer_btn.clicked.connect(self._drawer_clicked)
        col = QVBoxLayout()
        col.addWidget(self.drawer_btn)
        col.addStretch(1)
        lay.addLayout(col)
        self.drawer_scroll = QScrollArea()
        self.drawer_scroll.setWidgetResizable(True)
        self.drawer_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.drawer_scroll.setWidget(panel)
        self.drawer_scroll.setMinimumWidth(DRAWER_MIN_WIDTH)
        lay.addWidget(self.drawer_scroll, 1)
        self._drawer_auto = True  # follows the window's width until the user chooses
        QShortcut(QKeySequence("F9"), self, activated=self.drawer_btn.click).setWhatsThis("Show or hide the settings drawer")
        self._show_drawer(True)
        return drawer

    def _drawer_clicked(self, on: bool) -> None:
        self._drawer_auto = False
        self._show_drawer(on)

    def _show_drawer(self, on: bool) -> None:
        self.drawer_btn.setChecked(on)
        self.drawer_btn.setText("Settings \u203a" if on else "\u2039 Settings")
        self.drawer_scroll.setVisible(on)
        drawer = self._drawer_widget
        closed_width = self.drawer_btn.sizeHint().width() + 4
        drawer.setMaximumWidth(16777215 if on else closed_width)  # closed: only the toggle
        split = drawer.parentWidget()
        if isinstance(split, QSplitter):  # the transcript gives or takes the drawer's room
            sizes = split.sizes()
            want = max(DRAWER_OPEN_SIZE, sizes[2]) if on else closed_width
            sizes[1] = max(sizes[1] - (want - sizes[2]), 0)
            sizes[2] = want
            split.setSizes(sizes)

    @property
    def drawer_open(self) -> bool:
        return not self.drawer_scroll.isHidden()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        if self._drawer_auto:
            wide = self.window().width() >= DRAWER_OPEN_WIDTH
            if wide != self.drawer_open:
                self._show_drawer(wide)

    def set_charts_visible(self, on: bool) -> None:
        """Show or hide the live charts (the checkbox, or the GUI benchmark)."""
        if self.charts_toggle.isChecked() != on:
            self.charts_toggle.setChecked(on)  # comes back here through `toggled`
            return
        self.charts.setVisible(on)

    # -- settings persistence (the main window stores them in QSettings) -------------------
    def settings(self) -> dict[str, Any]:
        return {
            "drafter": self.drafter.currentData(), "lookahead": self.lookahead.value(),
            "temperature": self.temperature.value(), "top_p": self.top_p.value(), "seed": self.seed.value(),
            "max_tokens": self.max_tokens.value(), "system": self.system.toPlainText(),
        }

    def apply_settings(self, s: dict[str, Any]) -> None:
        i = self.drafter.findData(s.get("drafter", "model"))
        if i >= 0:
            self.drafter.setCurrentIndex(i)
        la = s.get("lookahead", "auto")
        self.lookahead.set_value(la if la == "auto" else int(la))
        self.temperature.setValue(float(s.get("temperature", 0.0)))
        self.top_p.setValue(float(s.get("top_p", 1.0)))
        self.seed.setValue(int(s.get("seed", -1)))
        self.max_tokens.setValue(int(s.get("max_tokens", 512)))
        self.system.setPlainText(str(s.get("system", "")))

    # -- conversations -------------------------------------------------------------------
    def refresh_conversations(self) -> None:
        """The chat list, newest first: each row its title and when it was last used."""
        current = self.conversation_id
        self.conv_list.blockSignals(True)
        self.conv_list.clear()
        try:
            convs = self.history.conversations(self.search.text())
        except HistoryError as e:
            convs = []
            self.message.emit(str(e))
        for c in convs:
            item = QListWidgetItem(f"{c.title}\n{relative_date(c.updated)}")
            item.setData(Qt.ItemDataRole.UserRole, c.id)
            item.setToolTip(f"{c.title}\nlast used {absolute_date(c.updated)}")
            self.conv_list.addItem(item)
            if c.id == current:
                self.conv_list.setCurrentItem(item)
        self.conv_list.blockSignals(False)

    def _conversation_selected(self, item: QListWidgetItem | None, _prev: Any = None) -> None:
        if item is None:
            return
        if self.worker is not None:
            self.message.emit("Stop the running answer before switching conversations")
            return
        self.charts.reset()  # step data is not stored: the charts show only a live answer
        self.open_conversation(int(item.data(Qt.ItemDataRole.UserRole)))

    def _conversation_clicked(self, item: QListWidgetItem) -> None:
        """A click on the row that is already current (currentItemChanged stays silent)."""
        if int(item.data(Qt.ItemDataRole.UserRole)) != self.conversation_id:
            self._conversation_selected(item)

    def _conversation_actions(self, menu: QMenu) -> QMenu:
        """Rename, Delete and Export of the open chat, for the context menu and the More button."""
        menu.addAction("Rename…", self.rename_conversation)
        menu.addAction("Export as Markdown…", lambda: self.export_conversation())
        menu.addSeparator()
        menu.addAction("Delete…", self.delete_conversation)
        return menu

    def _conversation_menu(self, pos: Any) -> None:
        item = self.conv_list.itemAt(pos)
        if item is None:
            return
        if int(item.data(Qt.ItemDataRole.UserRole)) != self.conversation_id:
            self._conversation_selected(item)
            if int(item.data(Qt.ItemDataRole.UserRole)) != self.conversation_id:
                return  # not opened (an answer is streaming): act on nothing
            self.conv_list.setCurrentItem(item)
        self.context_menu = self._conversation_actions(QMenu(self))
        self.context_menu.popup(self.conv_list.viewport().mapToGlobal(pos))

    def open_conversation(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        conv = self.history.get(conversation_id)
        if conv is not None:
            self.system.setPlainText(conv.system_prompt)
        try:
            msgs = self.history.messages(conversation_id)
        except HistoryError as e:  # a damaged page: say so where the conversation would be
            self.transcript.set_messages([])
            self.transcript.setPlainText(f"⚠ This conversation could not be read.\n\n{e}")
            self.stats_label.clear()
            return
        self.transcript.set_messages(msgs)
        last = next((m for m in reversed(msgs) if m.role == "assistant" and m.stats), None)
        self.stats_label.setText(stats_text(last.stats) if last and last.stats else "")
        self._clear_notes()

    def new_conversation(self) -> None:
        if self.worker is not None:
            return
        self.conversation_id = None
        self.transcript.set_messages([])
        self.stats_label.clear()
        self._clear_notes()
        self.charts.reset()
        self.conv_list.blockSignals(True)
        self.conv_list.setCurrentRow(-1)  # so a click on the previous chat is a change again
        self.conv_list.blockSignals(False)
        self.prompt.setFocus()

    def _clear_notes(self) -> None:
        """Notes about the last answer belong to it: another conversation starts without them."""
        for label in (self.auto_note, self.context_note):
            label.clear()
            label.hide()
        self.meter.schedule()

    def rename_conversation(self) -> None:
        if self.conversation_id is None:
            return
        conv = self.history.get(self.conversation_id)
        title, ok = QInputDialog.getText(self, "Rename conversation", "Title", text=conv.title if conv else "")
        if ok and title.strip():
            self.history.rename(self.conversation_id, title)
            self.refresh_conversations()

    def delete_conversation(self) -> None:
        if self.conversation_id is None or self.worker is not None:
            return
        conv = self.history.get(self.conversation_id)
        if QMessageBox.question(self, "Delete conversation", f"Delete “{conv.title if conv else ''}”?") != QMessageBox.StandardButton.Yes:
            return
        self.history.delete(self.conversation_id)
        self.new_conversation()
        self.refresh_conversations()

    # -- attachments and export ----------------------------------------------------------
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
        return used, exact, self._context_size()

    def _model_changed(self, *_: object) -> None:
        """Another model counts other tokens: recount the chips and the meter."""
        self.attachments.recount(self.counter.count)
        self.meter.update_now()

    def export_conversation(self, path: str | None = None) -> None:
        if self.conversation_id is None:
            self.message.emit("Nothing to export yet")
            return
        if path is None:
            conv = self.history.get(self.conversation_id)
            default = (conv.title if conv else "conversation").replace("/", "-") + ".md"
            path, _ = QFileDialog.getSaveFileName(self, "Export as Markdown", default, "Markdown (*.md)")
            if not path:
                return
        try:
            Path(path).write_text(self.history.to_markdown(self.conversation_id), encoding="utf-8")
        except OSError as e:
            self.error.emit(f"{path}: cannot write ({e.strerror})")
            return
        self.message.emit(f"Exported to {path}")

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

    def copy_last_answer(self) -> None:
        if self.conversation_id is None:
            return
        last = next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)
        if last is not None:
            QGuiApplication.clipboard().setText(message_text(last))
            self.message.emit("Answer copied as text (Copy as Markdown is under the answer)")

    # -- generation ----------------------------------------------------------------------
    def _draft_spec(self) -> Any:
        """The Draft box's choice for the loaded target. "Draft model" when the pair was loaded
        without one: the engine loads the pair's draft at the first answer that needs it."""
        key = self.drafter.currentData()
        if key == "lookup":
            return "lookup"
        if key == "none":
            return None
        pair = self.session.pair
        if pair is None:
            return None
        if draft_model_path(pair.draft) is not None:
            return pair.draft
        choice = self.model_bar.current()
        loaded = choice is not None and choice.draft is not None and Path(choice.target) == Path(pair.target)
        return choice.draft if loaded else "lookup"

    def _compose(self, text: str) -> str:
        """The user's message as stored and sent: the typed text, then each attachment."""
        return "\n\n".join([text] * bool(text) + [attachment_block(a) for a in self.attachments.items()])

    def _conversation_chat(self, before: int | None = None) -> list[dict]:
        """The open conversation as chat messages, those before message `before` only; while
        editing, only what precedes the edited message (Send replaces it and drops what follows)."""
        if self.conversation_id is None:
            return []
        msgs = self.history.messages(self.conversation_id)
        if before is None and self._editing is not None and self._editing[0] == self.conversation_id:
            before = self._editing[1]
        if before is not None:
            msgs = [m for m in msgs if m.id < before]
        return [{"role": m.role, "content": m.content} for m in msgs if m.role in ("user", "assistant") and m.content]

    def _fit_to_context(self, chat: list[dict]) -> Any:
        """The chat to send (engine/models/context_window.py's rule), or None after saying why not."""
        from engine.models.context_window import TooLarge, fit_chat
        from engine.errors import TandemError

        eng, system = self.session.engine, self.system.toPlainText()
        sys_msgs = [{"role": "system", "content": system}] if system else []
        try:
            return fit_chat(sys_msgs, chat, lambda msgs: len(eng.tokens_for(msgs, chat=True)), eng.n_ctx,
                            self.max_tokens.value())
        except TooLarge as e:
            self.error.emit(str(e))
        except TandemError as e:  # a chat template that cannot render these messages
            self.error.emit(str(e))
        return None

    def _show_context_note(self, note: str) -> None:
        self.context_note.setText(note)
        self.context_note.setVisible(bool(note))
        if note:
            self.message.emit(note)

    def send(self) -> None:
        text = self.prompt.toPlainText().strip()
        if not text and not self.attachments.items():
            return
        if self.session.engine is None:
            self.error.emit("No model loaded: pick one in the bar above the chat (or in Models) and Load")
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        content = self._compose(text)
        fit = self._fit_to_context(self._conversation_chat() + [{"role": "user", "content": content}])
        if fit is None:  # refused before anything is stored: the typed text and the chips stay
            return
        chat = [m for m in fit.messages if m["role"] != "system"]
        if self.conversation_id is None:
            title = (text or self.attachments.items()[0].name).splitlines()[0][:60]
            conv = self.history.create(title=title, system_prompt=self.system.toPlainText())
            self.conversation_id = conv.id
            self.refresh_conversations()
        else:
            self.history.set_system_prompt(self.conversation_id, self.system.toPlainText())
        self._drop_edited_message()
        self.history.add_message(self.conversation_id, "user", content)
        msgs = self.history.messages(self.conversation_id)
        self.transcript.set_messages(msgs)
        self.prompt.clear()
        self.attachments.clear()
        self._show_context_note(fit.note)
        self.auto_note.hide()
        self._assistant_msg = self.history.add_message(self.conversation_id, "assistant", "", status="generating")
        self._start_answer(chat)

    def _start_answer(self, prompt: Any, *, chat: bool = True) -> None:
        """Stream an answer into `self._assistant_msg`: `prompt` is the chat messages (or,
        for Continue, the prompt's token ids)."""
        self._stream_tokens = []
        self._k_shown = None
        self.charts.reset()
        self.transcript.begin_stream()
        self.live_stats.reset()
        self.stats_label.setText(self.live_stats.text())
        self._stats_timer.start()
        seed = self.seed.value()
        w = workers.GenerationWorker(
            self.session.engine, prompt, draft=self._draft_spec(), lookahead=self.lookahead.value(),
            max_tokens=self.max_tokens.value(), temperature=self.temperature.value(), top_p=self.top_p.value(),
            seed=None if seed < 0 else seed, chat=chat, system=self.system.toPlainText() or None, tag="chat",
        )
        w.tokens.connect(self._on_tokens)
        w.steps.connect(self._on_steps)
        w.prefill.connect(self._on_prefill)
        w.done.connect(self._on_done)
        w.failed.connect(self._on_failed)
        w.finished.connect(self._on_finished)
        self.worker = w
        self.session.run(w, "chat")
        self._sync_buttons()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.message.emit("Stopping…")

    def _lookahead_changed(self, value: Any) -> None:
        if self.worker is not None:
            self.worker.set_lookahead(value)

    def _on_tokens(self, tokens: list) -> None:
        self._stream_tokens.extend(tokens)
        self.transcript.append_tokens(tokens)

    def _on_steps(self, steps: list) -> None:
        """Cheap on purpose (it runs while llama.cpp computes): append to the charts' series
        (drawn later, at most 5 times a second), move the slider only when Auto's k changes."""
        if not steps:
            return
        self.charts.add_steps(steps)
        self.live_stats.add_steps(steps)
        k = steps[-1].k
        if k != self._k_shown:
            self._k_shown = k
            self.lookahead.show_in_use(k)
        self.session.liveSpeed.emit(self.charts.series.live_rate())

    def _on_prefill(self, done: int, total: int) -> None:
        self.prefill_label.setText(f"Reading the prompt… {done}/{total} tokens" if done < total else "")
        self.prefill_label.setVisible(done < total)

    def _partial_text(self) -> str:
        return "".join(ev.text for ev in self._stream_tokens)

    def _on_done(self, ev: Any) -> None:
        stats = ev.stats.to_dict()
        status = "complete" if ev.stats.finish_reason != "cancelled" else "stopped"
        self._stats_timer.stop()
        self._save_answer(self._answer_prefix + ev.text, stats, status)
        self.stats_label.setText(stats_text(stats))
        self._show_auto_note(stats)
        self.meter.schedule()
        self.session.liveSpeed.emit(0.0)

    def _show_auto_note(self, stats: dict[str, Any]) -> None:
        """Auto drafted nothing: say so under the answer, the cost model's numbers on hover."""
        from engine.measure.report import auto_idle_note

        costs = None
        try:
            costs = self.session.engine.decoder(self._draft_spec()).cost.snapshot()  # created for this answer
        except Exception:  # the figures are a detail; the line stands without them
            costs = None
        note = auto_idle_note(stats, costs)
        self.auto_note.setVisible(note is not None)
        if note is not None:
            self.auto_note.setText(note[0])
            self.auto_note.setToolTip(note[1])

    def _on_failed(self, msg: str) -> None:
        self._stats_timer.stop()
        self.stats_label.clear()  # not "Generating…" under a failed answer
        self._save_answer(self._partial_text(), None, "failed")
        self.error.emit(msg)

    def _save_answer(self, text: str, stats: dict | None, status: str) -> None:
        if self._assistant_msg is None:
            return
        spans = spans_from_tokens(self._stream_tokens)
        self.history.update_message(self._assistant_msg.id, text, stats=stats, spans=spans, status=status)
        msg = Message(self._assistant_msg.id, self._assistant_msg.conversation_id, "assistant", text, stats, spans, status)
        self._assistant_msg = None
        self._answer_prefix = ""
        self.transcript.end_stream(msg)
        self.refresh_conversations()

    def _on_finished(self) -> None:
        self.worker = None
        self._stats_timer.stop()
        self.prefill_label.clear()
        self.prefill_label.hide()
        self._sync_buttons()

    def shutdown(self) -> None:
        """The window is closing: stop and keep whatever was written."""
        if self.worker is not None:
            self.worker.cancel()
            if self._assistant_msg is not None:
                self.history.update_message(self._assistant_msg.id, self._partial_text(),
                                            spans=spans_from_tokens(self._stream_tokens), status="stopped")

    def _sync_buttons(self, *_: object) -> None:
        running = self.worker is not None
        self.send_btn.setEnabled(not running and self.session.engine is not None)
        self.stop_btn.setEnabled(running)
        # the Draft box's items follow the model bar's selection (app/widgets/model_bar.py)

    def answer_markdown(self) -> str:
        if self.conversation_id is None:
            return ""
        last = next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)
        return message_markdown(last) if last else ""

    # -- per-message actions: regenerate, edit and resend, continue ------------------------
    def _show_live_stats(self) -> None:
        """The stats line while streaming, a few times a second (not per token)."""
        if self.worker is not None:
            self.stats_label.setText(self.live_stats.text())

    def _on_message_action(self, action: str, message_id: int) -> None:
        if self.worker is not None or self.conversation_id is None:
            self.message.emit("Stop the running answer first")
            return
        {"regenerate": self.regenerate, "edit": self.edit_message, "continue": self.continue_answer}[action](message_id)

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
        """Drop the last answer and answer the same conversation again."""
        if not self._can_generate() or self._last_answer(message_id) is None:
            return
        cid = self.conversation_id
        prior = self._conversation_chat(before=message_id)
        fit = self._fit_to_context(prior) if prior else None
        if fit is None:
            return
        chat = [m for m in fit.messages if m["role"] != "system"]
        self.history.delete_messages_from(cid, message_id)
        self.transcript.set_messages(self.history.messages(cid))
        self._show_context_note(fit.note)
        self.auto_note.hide()
        self._assistant_msg = self.history.add_message(cid, "assistant", "", status="generating")
        self._start_answer(chat)

    def continue_answer(self, message_id: int) -> None:
        """Generate more of a stopped answer and append it: the prompt is the conversation with
        the partial answer as the open assistant turn (engine.decoding.chat.continuation_tokens)."""
        if not self._can_generate():
            return
        last = self._last_answer(message_id)
        if last is None or not last.content:
            return
        from engine.decoding.chat import continuation_tokens
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

    def edit_message(self, message_id: int) -> None:
        """Put a user message in the prompt box; Send replaces it and drops what follows."""
        m = self.transcript.message(message_id)
        if m is None or m.role != "user" or self.conversation_id is None:
            return
        self._editing = (self.conversation_id, message_id)
        self.prompt.setPlainText(m.content)
        self.edit_label.show()
        self.prompt.setFocus()

    def cancel_edit(self) -> None:
        self._editing = None
        self.edit_label.hide()
        self.prompt.clear()

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
