"""Logits processors: what a request changes in the target's scores before a token is chosen
(logit bias, repetition penalties), and the log-probabilities reported for chosen tokens.

Why here and not in `sampling`: speculation stays exact only if the *target's* distribution
at every verify row is the processed one. The decoder applies `RowProcessors.rows` to the
target's logits rows before `verify` (row i sees the context plus drafts[:i], exactly what
plain decoding would have seen at that position), and hands `RowProcessors.row` to a model
drafter so its proposals follow the same rules (better acceptance; correctness never depends
on the draft). Greedy output with a draft therefore equals greedy output without one.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from ...errors import TandemError

# (row, recent tokens: the context's tail then the drafts before this row) -> None, in place
Processor = Callable[[np.ndarray, Sequence[int]], None]


class LogitControlError(TandemError):
    """A logit bias, penalty or logprobs setting is out of range."""


@dataclass(frozen=True)
class Penalties:
    """llama.cpp's penalties over the last `last_n` tokens of the context (prompt included):
    `repeat` divides a seen token's positive logit (multiplies a negative one); `frequency`
    subtracts per occurrence, `presence` once (OpenAI's names and ranges)."""

    repeat: float = 1.0
    frequency: float = 0.0
    presence: float = 0.0
    last_n: int = 64

    def __post_init__(self) -> None:
        for name, v, lo, hi in (("repeat_penalty", self.repeat, 0.0, 10.0),
                                ("frequency_penalty", self.frequency, -2.0, 2.0),
                                ("presence_penalty", self.presence, -2.0, 2.0)):
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not lo <= v <= hi:
                raise LogitControlError(f"{name} must be a number in {lo:g}..{hi:g}, got {v!r}")
        if self.repeat <= 0.0:
            raise LogitControlError(f"repeat_penalty must be > 0 (1 = off), got {self.repeat!r}")
        if isinstance(self.last_n, bool) or not isinstance(self.last_n, int) or self.last_n < 1:
            raise LogitControlError(f"the penalty window must be an integer >= 1, got {self.last_n!r}")

    @property
    def active(self) -> bool:
        return self.repeat != 1.0 or self.frequency != 0.0 or self.presence != 0.0

    def __call__(self, row: np.ndarray, recent: Sequence[int]) -> None:
        window = recent[-self.last_n:]
        if not window:
            return
        ids, counts = np.unique(np.asarray(window, dtype=np.int64), return_counts=True)
        keep = ids < row.shape[0]
        ids, counts = ids[keep], counts[keep]
        x = row[ids].astype(np.float64)
        if self.repeat != 1.0:
            x = np.where(x > 0, x / self.repeat, x * self.repeat)
        x -= counts * self.frequency + self.presence
        row[ids] = x


def check_logit_bias(bias: Mapping[int, float] | None, n_vocab: int | None = None) -> dict[int, float]:
    """Token id -> bias added to its logit (-100..100, OpenAI's range; -100 bans, 100 forces)."""
    out: dict[int, float] = {}
    for tok, v in (bias or {}).items():
        if isinstance(tok, bool) or not isinstance(tok, numbers.Integral) or tok < 0:
            raise LogitControlError(f"logit_bias: token ids are integers >= 0, got {tok!r}")
        if n_vocab is not None and tok >= n_vocab:
            raise LogitControlError(f"logit_bias: token id {tok} is outside the vocabulary (0..{n_vocab - 1})")
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not -100.0 <= float(v) <= 100.0:
            raise LogitControlError(f"logit_bias: the bias of token {tok} must be a number in -100..100, got {v!r}")
        out[int(tok)] = float(v)
    return out


class LogitBias:
    """Adds fixed values to some tokens' logits (every row)."""

    def __init__(self, bias: Mapping[int, float]):
        self.ids = np.fromiter(bias.keys(), dtype=np.int64, count=len(bias))
        self.values = np.fromiter(bias.values(), dtype=np.float64, count=len(bias))

    def __call__(self, row: np.ndarray, recent: Sequence[int]) -> None:
        keep = self.ids < row.shape[0]  # a draft model's vocabulary may be smaller
        row[self.ids[keep]] += self.values[keep]


class RowProcessors:
    """The processors of one run, applied to logits rows in order (bias, then penalties)."""

    def __init__(self, processors: Sequence[Processor] = (), window: int = 0):
        self.processors = list(processors)
        self.window = window  # how many recent context tokens the processors read

    @classmethod
    def for_request(cls, logit_bias: Mapping[int, float] | None, penalties: Penalties | None) -> "RowProcessors":
        procs: list[Processor] = []
        if logit_bias:
            procs.append(LogitBias(logit_bias))
        window = 0
        if penalties is not None and penalties.active:
            procs.append(penalties)
            window = penalties.last_n
        return cls(procs, window)

    def __bool__(self) -> bool:
        return bool(self.processors)

    def row(self, row: np.ndarray, context: Sequence[int]) -> np.ndarray:
        """A processed copy of one row that follows `context`."""
        out = np.array(row, dtype=np.float32, copy=True)
        recent = list(context[-self.window:]) if self.window else []
        for p in self.processors:
            p(out, recent)
        return out

    def rows(self, logits: np.ndarray, context: Sequence[int], drafts: Sequence[int]) -> np.ndarray:
        """Processed copies of verify rows: row i follows `context` + drafts[:i]."""
        out = np.array(logits, dtype=np.float32, copy=True)
        tail = list(context[-self.window:]) if self.window else []
        for i in range(out.shape[0]):
            recent = (tail + list(drafts[:i]))[-self.window:] if self.window else []
            for p in self.processors:
                p(out[i], recent)
        return out


def log_softmax(row: np.ndarray) -> np.ndarray:
    x = np.asarray(row, dtype=np.float64)
    m = x.max()
    return x - m - math.log(float(np.exp(x - m).sum()))


def token_logprobs(row: np.ndarray, token: int, top: int) -> tuple[float, list[tuple[int, float]]]:
    """The chosen token's log-probability under the (processed) target row, and the `top` most
    likely tokens with theirs, best first."""
    lp = log_softmax(row)
    best: list[tuple[int, float]] = []
    if top > 0:
        ids = np.argpartition(-lp, top - 1)[:top] if top < lp.shape[0] else np.arange(lp.shape[0])
        ids = ids[np.argsort(-lp[ids], kind="stable")]
        best = [(int(i), float(lp[i])) for i in ids]
    return float(lp[token]), best
