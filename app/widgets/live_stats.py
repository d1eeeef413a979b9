"""The stats line while an answer streams: running totals from the StepEvents the chat view
already receives, worded like the finished answer's line (engine/measure/report.py).

Adding steps is a few integer additions (it runs for every batch of steps); the text is
built only when the view's timer asks, a few times a second.
"""

from __future__ import annotations

from typing import Any

REFRESH_MS = 250  # how often the chat view rewrites the line while streaming


class LiveStats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.tokens = 0
        self.steps = 0
        self.drafted = 0
        self.accepted = 0
        self._t0: float | None = None  # the first step's time and the tokens emitted before it ended
        self._tokens0 = 0
        self._t_last = 0.0

    def add_steps(self, steps: list[Any]) -> None:
        for s in steps:
            self.steps += 1
            self.tokens += s.emitted
            self.drafted += s.drafted
            self.accepted += s.accepted
            if self._t0 is None:
                self._t0, self._tokens0 = s.t, self.tokens
            self._t_last = s.t

    def rate(self) -> float:
        """Decode tokens per second since the first step (0 until there are two)."""
        if self._t0 is None or self._t_last <= self._t0:
            return 0.0
        return (self.tokens - self._tokens0) / (self._t_last - self._t0)

    def text(self) -> str:
        if not self.steps:
            return "Generating…"
        parts = [f"Generating… {self.tokens} tokens", f"{self.rate():.1f} tok/s"]
        if self.drafted:  # an acceptance rate of nothing drafted is no figure
            parts += [f"acceptance {self.accepted / self.drafted:.0%} ({self.accepted}/{self.drafted})",
                      f"{self.tokens / self.steps:.2f} tokens/step"]
        return " · ".join(parts)
