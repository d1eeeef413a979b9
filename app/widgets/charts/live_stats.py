"""The stats line while an answer streams: running totals from the StepEvents the chat view
already receives, worded like the finished answer's line (engine/measure/report.py).

Adding steps is a few integer additions (it runs for every batch of steps); the text is
built only when the view's timer asks, a few times a second.

It carries no tok/s: the status bar shows the running figure, and two different speeds on
screen at once (this line's since-the-start and the bar's recent one) read as a contradiction.
While the first answer on a machine waits for its costs to be measured, it says so.
"""

from __future__ import annotations

from typing import Any

from ..controls.live_label import SEPARATOR  # the label keeps the pieces between these whole

REFRESH_MS = 250  # how often the chat view rewrites the line while streaming


class LiveStats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.tokens = 0
        self.steps = 0
        self.drafted = 0
        self.accepted = 0
        self.calibrating_s: float | None = None  # measuring this machine: its estimate, until the next step

    def calibrating(self, estimate_s: float) -> None:
        self.calibrating_s = estimate_s

    def add_steps(self, steps: list[Any]) -> None:
        if steps:
            self.calibrating_s = None
        for s in steps:
            self.steps += 1
            self.tokens += s.emitted
            self.drafted += s.drafted
            self.accepted += s.accepted

    def text(self) -> str:
        if self.calibrating_s is not None:
            return f"Measuring this machine (first run only, ~{max(1, round(self.calibrating_s))} s)…"
        if not self.steps:
            return "Generating…"
        parts = [f"Generating… {self.tokens} tokens"]
        if self.drafted:  # an acceptance rate of nothing drafted is no figure
            parts += [f"acceptance {self.accepted / self.drafted:.0%} ({self.accepted}/{self.drafted})",
                      f"{self.tokens / self.steps:.2f} tokens/step"]
        return SEPARATOR.join(parts)
