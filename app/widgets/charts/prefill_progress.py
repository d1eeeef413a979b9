"""Prompt reading, told as it goes: the engine reports a long prompt in batches (512 tokens on
a CPU, several seconds each), so a count of what is done moved in jumps with nothing in
between. From the rate the batches so far took, this estimates where the reading is now
(never past the batch under way) and how long the rest will take; and it says how much of the
prompt needed no reading (kept from an earlier answer, or the prompt cache)."""

from __future__ import annotations

from engine.measure.report import seconds_left


class PrefillProgress:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total = 0
        self.done = 0
        self.cached = 0  # prompt tokens not read: the context kept them, or the prompt cache held them
        self._start: float | None = None  # when reading began (the first report, 0 done)
        self._last_t = 0.0
        self._batch = 0  # the size of the last batch: the next one ends at most that far on

    def update(self, done: int, total: int, now: float, cached: int = 0) -> None:
        """`done` of `total` tokens to read are read; `cached` more needed no reading."""
        if self._start is None or done < self.done:
            self._start = now
        self._batch = max(self._batch, done - self.done)
        self.done, self.total, self._last_t, self.cached = done, total, now, cached

    @property
    def reading(self) -> bool:
        return self._start is not None and self.done < self.total

    def rate(self) -> float:
        """Tokens per second over the batches read so far (0 before the first is done)."""
        if self._start is None or self.done <= 0 or self._last_t <= self._start:
            return 0.0
        return self.done / (self._last_t - self._start)

    def estimate(self, now: float) -> tuple[int, float | None]:
        """(tokens read by now, seconds left), extrapolated from the rate; (done, None) before
        there is a rate. Never past the end of the batch under way, nor the prompt."""
        rate = self.rate()
        if rate <= 0:
            return self.done, None
        ahead = int(rate * max(0.0, now - self._last_t))
        at = min(self.done + min(ahead, max(self._batch - 1, 0)), self.total - 1)
        return max(at, self.done), max(0.0, (self.total - at) / rate)

    def text(self, now: float) -> str:
        at, left = self.estimate(now)
        pct = 100 * at // max(self.total, 1)
        line = f"Reading the prompt… {pct}% ({at:,}/{self.total:,} tokens"
        if self.cached:  # the prompt is the tokens to read, those that were not, and its last (read with the answer)
            line += f"; {self.cached:,} of {self.cached + self.total + 1:,} from cache"
        return line + (f", about {seconds_left(left)} left)" if left is not None else ")")
