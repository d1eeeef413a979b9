"""The stats line while an answer streams: running totals from the StepEvents the chat view
already receives, worded like the finished answer's line (engine/measure/report.py).

Adding steps is a few integer additions (it runs for every batch of steps); the text is
built only when the view's timer asks, a few times a second.

It carries no tok/s: the status bar shows the running figure, and two different speeds on
screen at once (this line's since-the-start and the bar's recent one) read as a contradiction.
While a model draft catches up with the prompt (between the target's steps, which go on), it
says so, with the time left from the rate of its reading so far.
"""

from __future__ import annotations

from typing import Any

from engine.measure.report import draft_reading_line

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
        self.draft_done = self.draft_total = 0  # the draft's reading of the prompt, while it catches up
        self._draft_start: tuple[float, int] | None = None  # when (and at what count) it was first told
        self._draft_last = 0.0

    def draft_reading(self, done: int, total: int, now: float) -> None:
        """The model draft has read `done` of the `total` tokens it must catch up with (done ==
        total: it has, and drafting starts)."""
        if self._draft_start is None or done < self.draft_done:
            self._draft_start = (now, done)
        self.draft_done, self.draft_total, self._draft_last = done, total, now

    def _draft_left_s(self) -> float | None:
        """Seconds until the draft has caught up, from its reading rate so far (None: no rate yet)."""
        if self._draft_start is None:
            return None
        t0, n0 = self._draft_start
        if self.draft_done <= n0 or self._draft_last <= t0:
            return None
        rate = (self.draft_done - n0) / (self._draft_last - t0)
        return (self.draft_total - self.draft_done) / rate

    def add_steps(self, steps: list[Any]) -> None:
        for s in steps:
            self.steps += 1
            self.tokens += s.emitted
            self.drafted += s.drafted
            self.accepted += s.accepted

    def text(self) -> str:
        parts = [f"Generating… {self.tokens} tokens" if self.steps else "Generating…"]
        if self.drafted:  # an acceptance rate of nothing drafted is no figure
            parts += [f"acceptance {self.accepted / self.drafted:.0%} ({self.accepted}/{self.drafted})",
                      f"{self.tokens / self.steps:.2f} tokens/step"]
        if self.draft_done < self.draft_total:
            parts.append(draft_reading_line(self.draft_done, self.draft_total, self._draft_left_s()))
        return SEPARATOR.join(parts)
