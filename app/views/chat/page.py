"""Chat: conversations (SQLite), streaming answers with provenance colours, the lookahead
slider and Auto switch, sampling settings, live charts, per-answer stats, attachments and
Markdown export. The page assembles its parts; each mixin of this package holds one of
them (layout, drawer, conversations, composer, answering, message actions)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QWidget

from ...history import History, Message
from ...session import Session
from ...widgets.live_stats import LiveStats
from ...widgets.token_meter import TokenCounter
from ... import workers
from .answering import AnsweringMixin
from .composer import ComposerMixin
from .conversations import ConversationsMixin
from .drawer import DrawerMixin
from .layout import LayoutMixin
from .message_actions import MessageActionsMixin


class ChatView(LayoutMixin, DrawerMixin, ConversationsMixin, ComposerMixin, AnsweringMixin, MessageActionsMixin,
               QWidget):
    message = Signal(str)  # a one-line notice for the status bar
    error = Signal(str)

    def __init__(self, session: Session, history: History, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.history = history
        history.on_write_error = self.error.emit  # a failed save is shown in this window, not only on stderr
        self.conversation_id: int | None = None
        self.worker: workers.GenerationWorker | None = None
        self._stream_tokens: list = []
        self._partial_saved = float("-inf")  # when the answer being written was last kept (time.monotonic)
        self._k_shown: int | None = None  # the lookahead last shown on the slider while streaming
        self._assistant_msg: Message | None = None
        self._editing: tuple[int, int] | None = None  # (conversation, message) that Send replaces
        self._answer_prefix = ""  # Continue: the stored part of the answer being continued
        self._drafts: dict[int | None, str] = {}  # unsent prompts of the other conversations (None: a new chat)
        self._closing = False  # the window is closing: a stopped answer says so, not "stopped by you"
        self.live_stats = LiveStats()
        self.counter = TokenCounter(lambda: self.session.engine)
        self._build()
        self.refresh_conversations()
        session.busyChanged.connect(self._sync_buttons)
        session.pairChanged.connect(self._sync_buttons)
        session.pairChanged.connect(self._model_changed)
        self._sync_buttons()
        self.meter.update_now()

    def _build(self) -> None:
        """Conversations | transcript and prompt | the settings drawer, in a splitter."""
        root = QHBoxLayout(self)
        split = QSplitter(Qt.Orientation.Horizontal)
        root.addWidget(split)
        split.addWidget(self._conversations_dock(self._build_conversations()))
        split.addWidget(self._build_answer_column())
        split.addWidget(self._drawer(self._build_settings_panel()))
        split.setSizes([200, 640, 420])
        split.setStretchFactor(1, 1)
        split.setCollapsible(1, False)
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.send).setWhatsThis("Send the message")
        QShortcut(QKeySequence("Ctrl+Enter"), self, activated=self.send).setWhatsThis("Send the message (keypad Enter)")
        QShortcut(QKeySequence("Escape"), self, activated=self.stop).setWhatsThis("Stop the answer being generated")

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

