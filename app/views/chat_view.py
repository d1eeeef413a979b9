"""Chat: conversations (SQLite), streaming answers with provenance colours, the lookahead
slider and Auto switch, sampling settings, live charts, per-answer stats, attachments and
Markdown export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QInputDialog, QLabel,
    QLineEdit, QListWidget, QListWidgetItem, QMenu, QMessageBox, QPlainTextEdit, QPushButton, QSpinBox, QSplitter,
    QVBoxLayout, QWidget,
)

from ..history import History, HistoryError, Message, message_markdown
from ..session import Session
from ..widgets.attachments import (
    Attachment, AttachmentChips, AttachmentError, FileDropFilter, PromptEdit, attachment_block, read_text_file,
)
from ..widgets.charts import LiveCharts
from ..widgets.lookahead_control import LookaheadControl
from ..widgets.model_bar import ModelBar, draft_model_path
from ..widgets.token_meter import TokenCounter, TokenMeter
from ..widgets.provenance import Legend
from ..widgets.transcript import Transcript, spans_from_tokens
from .. import workers



def stats_text(s: dict[str, Any]) -> str:
    """The engine's one stats wording (engine/report.py), as the CLI prints it."""
    from engine.report import stats_line

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
        self.conv_list.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        btns = QHBoxLayout()
        self.new_btn = QPushButton("New")
        self.new_btn.setToolTip("New chat (Ctrl+N)")
        self.new_btn.clicked.connect(self.new_conversation)
        self.rename_btn = QPushButton("Rename")
        self.rename_btn.clicked.connect(self.rename_conversation)
        self.delete_btn = QPushButton("Delete")
        self.delete_btn.clicked.connect(self.delete_conversation)
        for b in (self.new_btn, self.rename_btn, self.delete_btn):
            btns.addWidget(b)
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
        self.stats_label = QLabel("")
        self.stats_label.setObjectName("answerStats")
        self.stats_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.prefill_label = QLabel("")
        self.prefill_label.hide()
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
        split.addWidget(right)
        split.setSizes([200, 640, 420])
        split.setStretchFactor(1, 1)

        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.send)
        QShortcut(QKeySequence("Ctrl+Enter"), self, activated=self.send)
        QShortcut(QKeySequence("Escape"), self, activated=self.stop)

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
        current = self.conversation_id
        self.conv_list.blockSignals(True)
        self.conv_list.clear()
        try:
            convs = self.history.conversations(self.search.text())
        except HistoryError as e:
            convs = []
            self.message.emit(str(e))
        for c in convs:
            item = QListWidgetItem(c.title)
            item.setData(Qt.ItemDataRole.UserRole, c.id)
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
        self.open_conversation(int(item.data(Qt.ItemDataRole.UserRole)))

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
        self.conv_list.clearSelection()
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
            QGuiApplication.clipboard().setText(last.content)
            self.message.emit("Answer copied")

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

    def _fit_to_context(self, content: str) -> Any:
        """The chat to send (engine/context_window.py's rule), or None after saying why not."""
        from engine.context_window import TooLarge, fit_chat
        from engine.errors import TandemError

        eng, system = self.session.engine, self.system.toPlainText()
        prior: list[dict] = []
        if self.conversation_id is not None:
            prior = [{"role": m.role, "content": m.content} for m in self.history.messages(self.conversation_id)
                     if m.role in ("user", "assistant") and m.content]
        sys_msgs = [{"role": "system", "content": system}] if system else []
        try:
            return fit_chat(sys_msgs, prior + [{"role": "user", "content": content}],
                            lambda msgs: len(eng.tokens_for(msgs, chat=True)), eng.n_ctx, self.max_tokens.value())
        except TooLarge as e:
            self.error.emit(str(e))
        except TandemError as e:  # a chat template that cannot render these messages
            self.error.emit(str(e))
        return None

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
        fit = self._fit_to_context(content)
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
        self.history.add_message(self.conversation_id, "user", content)
        msgs = self.history.messages(self.conversation_id)
        self.transcript.set_messages(msgs)
        self.prompt.clear()
        self.attachments.clear()
        self.context_note.setText(fit.note)
        self.context_note.setVisible(bool(fit.note))
        if fit.note:
            self.message.emit(fit.note)
        self.auto_note.hide()
        self._assistant_msg = self.history.add_message(self.conversation_id, "assistant", "", status="generating")
        self._stream_tokens = []
        self._k_shown = None
        self.charts.reset()
        self.transcript.begin_stream()
        seed = self.seed.value()
        w = workers.GenerationWorker(
            self.session.engine, chat, draft=self._draft_spec(), lookahead=self.lookahead.value(),
            max_tokens=self.max_tokens.value(), temperature=self.temperature.value(), top_p=self.top_p.value(),
            seed=None if seed < 0 else seed, chat=True, system=self.system.toPlainText() or None, tag="chat",
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
        (drawn later, at most 10 times a second), move the slider only when Auto's k changes."""
        if not steps:
            return
        self.charts.add_steps(steps)
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
        self._save_answer(ev.text, stats, status)
        self.stats_label.setText(stats_text(stats))
        self._show_auto_note(stats)
        self.meter.schedule()
        self.session.liveSpeed.emit(0.0)

    def _show_auto_note(self, stats: dict[str, Any]) -> None:
        """Auto drafted nothing: say so under the answer, the cost model's numbers on hover."""
        from engine.report import auto_idle_note

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
        self._save_answer(self._partial_text(), None, "failed")
        self.error.emit(msg)

    def _save_answer(self, text: str, stats: dict | None, status: str) -> None:
        if self._assistant_msg is None:
            return
        spans = spans_from_tokens(self._stream_tokens)
        self.history.update_message(self._assistant_msg.id, text, stats=stats, spans=spans, status=status)
        msg = Message(self._assistant_msg.id, self._assistant_msg.conversation_id, "assistant", text, stats, spans, status)
        self._assistant_msg = None
        self.transcript.end_stream(msg)
        self.refresh_conversations()

    def _on_finished(self) -> None:
        self.worker = None
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
