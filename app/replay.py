"""Replaying recorded runs side by side, without Qt: a virtual clock (real time × a speed
that may change mid-replay without a jump) and, per run, how many of its recorded tokens
are due. The Race view only asks it each frame what to show next."""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence


def live_rate(tokens: Sequence[Any]) -> float:
    """Decode tok/s from recorded TokenEvents: tokens after the first over the time they took."""
    if len(tokens) < 2 or tokens[-1].t <= tokens[0].t:
        return 0.0
    return (len(tokens) - 1) / (tokens[-1].t - tokens[0].t)


class ReplayClock:
    """Which recorded tokens (TokenEvents with `.t`, seconds since their run started) are due.

    `advance()` returns, per run, the tokens that became due since the last call; `finish()`
    the ones still to show. The clock runs at `speed` × real time from `start()`.
    """

    def __init__(self, tokens: dict[str, Sequence[Any]], *, speed: float = 1.0,
                 now: Callable[[], float] = time.perf_counter):
        self.tokens = tokens
        self.speed = speed
        self._now = now
        self._base = 0.0  # virtual seconds reached before the last (re)start or speed change
        self._t0: float | None = None
        self.shown = {side: 0 for side in tokens}
        self.end = max((toks[-1].t for toks in tokens.values() if toks), default=0.0)

    def start(self) -> None:
        """From the beginning: nothing shown, virtual time 0."""
        self._base = 0.0
        self._t0 = self._now()
        self.shown = {side: 0 for side in self.tokens}

    def time(self) -> float:
        """Virtual seconds since the replay started (0 before)."""
        if self._t0 is None:
            return self._base
        return self._base + (self._now() - self._t0) * self.speed

    def set_speed(self, speed: float) -> None:
        """Change the speed from now on; the virtual time so far is kept."""
        if self._t0 is not None:
            self._base = self.time()
            self._t0 = self._now()
        self.speed = speed

    @property
    def done(self) -> bool:
        """Every recorded token has been handed out by `advance()` (not merely: the clock
        passed the end, which can happen between an `advance()` and this check and would
        end the replay one frame short)."""
        return all(self.shown[side] >= len(toks) for side, toks in self.tokens.items())

    def advance(self) -> dict[str, list]:
        """The tokens of each run that became due since the last call (possibly none)."""
        now = self.time()
        due: dict[str, list] = {}
        for side, toks in self.tokens.items():
            i0 = i = self.shown[side]
            while i < len(toks) and toks[i].t <= now:
                i += 1
            due[side] = list(toks[i0:i])
            self.shown[side] = i
        return due

    def finish(self) -> dict[str, list]:
        """Everything not shown yet (a stopped replay shows the whole runs)."""
        rest = {side: list(toks[self.shown[side]:]) for side, toks in self.tokens.items()}
        self.shown = {side: len(toks) for side, toks in self.tokens.items()}
        return rest

    def speed_text(self, side: str, final_rate: float | None = None) -> str:
        """What a run's pane says about its speed at this point of the replay."""
        toks, i = self.tokens[side], self.shown[side]
        if toks and i >= len(toks):
            rate = final_rate if final_rate is not None else live_rate(toks)
            return f"✓ {toks[-1].t:.2f} s · {rate:.1f} tok/s"
        if i >= 2:
            return f"{live_rate(toks[:i]):.1f} tok/s"
        return "reading prompt…" if toks else ""  # no rate before the second token
