"""The token meter under the prompt box ("1,234 / 8,192 tokens", red when over) and the
token counter behind it and the attachment chips.

Counting uses the loaded target's own tokenizer (llama.cpp's vocabulary, which is
read-only and safe beside a running generation) and caches each text's count, so a long
history is tokenized once, not on every keystroke. The meter recounts at most a few
times a second while the user types (a single-shot debounce timer).
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QWidget

TEMPLATE_TOKENS_PER_MESSAGE = 5  # role markers of a chat template (ChatML: <|im_start|>role\n … <|im_end|>\n)
DEBOUNCE_MS = 300


class TokenCounter:
    """Tokens of a text with the loaded target's tokenizer; characters/4 without a model."""

    def __init__(self, engine: Callable[[], Any]):
        self._engine = engine
        self._cache: dict[tuple[int, str], int] = {}
        self._owner: int | None = None

    def count(self, text: str) -> tuple[int, bool]:
        """(tokens, exact): exact when counted by a loaded model's tokenizer."""
        eng = self._engine()
        if eng is None or getattr(eng, "closed", False):
            return (len(text) + 3) // 4, False
        if id(eng) != self._owner:  # another model: other tokens
            self._cache.clear()
            self._owner = id(eng)
        key = (len(text), text)
        n = self._cache.get(key)
        if n is None:
            n = len(eng.target.tokenize(text, add_special=False, parse_special=False)) if text else 0
            if len(self._cache) > 2000:
                self._cache.clear()
            self._cache[key] = n
        return n, True

    def count_messages(self, contents: list[str]) -> tuple[int, bool]:
        """A chat's prompt size: each message's tokens plus its template markers."""
        total, exact = 0, True
        for c in contents:
            n, ex = self.count(c)
            total += n + TEMPLATE_TOKENS_PER_MESSAGE
            exact = exact and ex
        return total, exact


class TokenMeter(QLabel):
    """"used / context tokens" for system + history + prompt + attachments + max tokens; red when over."""

    def __init__(self, measure: Callable[[], tuple[int, bool, int]], parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("tokenMeter")
        self._measure = measure  # () -> (tokens, exact, n_ctx)
        self.used = 0
        self.n_ctx = 0
        self.over = False
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(DEBOUNCE_MS)
        self.timer.timeout.connect(self.update_now)

    def schedule(self) -> None:
        """Recount soon; repeated calls within the debounce interval cost one count."""
        if not self.timer.isActive():
            self.timer.start()

    def update_now(self) -> None:
        self.timer.stop()
        used, exact, n_ctx = self._measure()
        self.used, self.n_ctx, self.over = used, n_ctx, used > n_ctx
        self.setText(f"{'' if exact else '≈'}{used:,} / {n_ctx:,} tokens")
        self.setStyleSheet("color: #d32f2f; font-weight: bold;" if self.over else "")
        self.setToolTip(
            "System prompt, chat history, your message and attachments, counted with the loaded model's tokenizer, "
            "plus max tokens for the answer "
            f"(plus about {TEMPLATE_TOKENS_PER_MESSAGE} tokens of chat-template markers per message; "
            "Send checks the exact prompt)"
            if exact else "Estimated (characters / 4): no model is loaded")
        if self.over:
            self.setToolTip(self.toolTip() + ".\nOver the context: the oldest turns will not be sent, "
                            "or load the model with a longer context (model bar above the chat).")
