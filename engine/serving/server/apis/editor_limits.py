"""The stops code editors ask of a completion: llama-server's `n_indent` and `t_max_predict_ms`.

An editor shows a suggestion of the current block: `n_indent` ends the answer at the first
line indented less than that (the line is cut after its indentation), and
`t_max_predict_ms` ends it at the first new line once generating has taken that long. The
rules, and the order they are checked in after each token, copy llama-server's
`process_token`, so an editor sees the same cut.
"""

from __future__ import annotations

import time
from typing import Callable


class EditorLimits:
    """Feed each token's text in order; `feed` says what of it to keep and whether to stop."""

    def __init__(self, n_indent: int = 0, t_max_predict_ms: int = 0, clock: Callable[[], float] = time.monotonic):
        self.n_indent, self.t_max_ms, self.clock = n_indent, t_max_predict_ms, clock
        self.text = ""  # the answer so far, after any cut
        self.has_new_line = False
        self.last_nl_pos = 0
        self.started: float | None = None  # when the first token arrived
        self.stopped = False

    @property
    def active(self) -> bool:
        return self.n_indent > 0 or self.t_max_ms > 0

    def feed(self, piece: str) -> tuple[str, bool]:
        """(the new text to send, stop now). After a cut the text sent so far may run past
        `text` (llama-server streams it too); the final answer is `text`."""
        if self.started is None:
            self.started = self.clock()
        before = len(self.text)
        self.text += piece
        if self.has_new_line and self.n_indent > 0:
            if self.last_nl_pos > 0:
                pos = self.last_nl_pos
                while pos < len(self.text) and self.text[pos] in " \t":
                    pos += 1
                if pos < len(self.text) and pos - self.last_nl_pos < self.n_indent:
                    self.text = self.text[:pos]
                    self.stopped = True
            nl = self.text.find("\n", self.last_nl_pos)
            if nl != -1:
                self.last_nl_pos = nl + 1
        if "\n" in piece:
            self.has_new_line = True
            if self.t_max_ms > 0 and (self.clock() - self.started) * 1000.0 > self.t_max_ms:
                self.stopped = True
        return self.text[before:], self.stopped
