"""Sampling parameters and the target's next-token distribution as llama.cpp's filters define it.

`distribution` is the reference: top-k, top-p and min-p on the raw distribution, then the
temperature (llama.cpp's order), in float64. lazy_dist.py computes the same distribution
lazily for speed; sampling.py draws from it and holds the exact acceptance rule.
Imports: numpy and engine.errors only.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ...errors import TandemError

SEED_MAX = 2**64 - 1  # numpy's generators take any non-negative int; llama.cpp-style seeds fit in 64 bits


class SamplingParamError(TandemError):
    """A sampling parameter is of the wrong type, not finite, or out of its range."""


def _real(name: str, value: object) -> float:
    """`value` as a finite float, or a SamplingParamError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SamplingParamError(f"{name} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise SamplingParamError(f"{name} must be a finite number, got {value!r}")
    return x


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SamplingParamError(f"{name} must be an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SamplingParams:
    """How the target picks tokens. temperature <= 0 means greedy (argmax).

    Every parameter is checked here, once, for every caller (CLI, API, app, bench): NaN or
    infinity would sample noise and poison the metrics log, so they never get past this.
    """

    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    min_p: float = 0.0  # 0 = off
    seed: int | None = None

    def __post_init__(self) -> None:
        temperature = _real("temperature", self.temperature)
        if temperature < 0:
            raise SamplingParamError(f"temperature must be >= 0 (0 = greedy), got {self.temperature!r}")
        top_k = _int("top-k", self.top_k)
        if top_k < 0:
            raise SamplingParamError(f"top-k must be >= 0 (0 = off), got {self.top_k!r}")
        top_p = _real("top-p", self.top_p)
        if not 0.0 < top_p <= 1.0:
            raise SamplingParamError(f"top-p must be in (0, 1], got {self.top_p!r}")
        min_p = _real("min-p", self.min_p)
        if not 0.0 <= min_p < 1.0:
            raise SamplingParamError(f"min-p must be in [0, 1), got {self.min_p!r}")
        seed = None if self.seed is None else _int("seed", self.seed)
        if seed is not None and not 0 <= seed <= SEED_MAX:
            raise SamplingParamError(f"seed must be in 0..{SEED_MAX} (or unset for a random one), got {self.seed!r}")
        # store plain Python numbers (numpy scalars, ints for floats) so to_dict() is clean JSON
        for name, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p), ("seed", seed)):
            object.__setattr__(self, name, v)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "seed": self.seed,
        }


GREEDY = SamplingParams()


@dataclass
class Dist:
    """A sparse probability distribution over token ids (ids unique, probs sum to 1)."""

    ids: np.ndarray  # int64
    probs: np.ndarray  # float64

    def prob(self, token: int) -> float:
        hit = np.nonzero(self.ids == token)[0]
        return float(self.probs[hit[0]]) if hit.size else 0.0

    @classmethod
    def one_hot(cls, token: int) -> "Dist":
        return cls(np.array([token], dtype=np.int64), np.array([1.0]))


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def distribution(logits: np.ndarray, params: SamplingParams) -> Dist:
    """The filtered, temperature-scaled distribution the target samples from."""
    logits = np.asarray(logits, dtype=np.float64)
    n = logits.shape[0]
    if params.top_k and params.top_k < n:
        ids = np.argpartition(-logits, params.top_k - 1)[: params.top_k]
    else:
        ids = np.arange(n)
    lg = logits[ids]
    p = _softmax(lg)
    if params.top_p < 1.0:
        keep = _top_p_keep(p, params.top_p)
        ids, lg, p = ids[keep], lg[keep], p[keep]
        p = p / p.sum()
    if params.min_p > 0.0:
        keep = p >= params.min_p * p.max()
        ids, lg = ids[keep], lg[keep]
    t = params.temperature if params.temperature > 0 else 1.0
    # shift before dividing: a tiny temperature then sends the others to -inf, never inf - inf = NaN
    with np.errstate(over="ignore", divide="ignore"):
        probs = _softmax((lg - lg.max()) / t)
    return Dist(ids.astype(np.int64), probs)


def _top_p_keep(p: np.ndarray, top_p: float) -> np.ndarray:
    """Indices of the smallest set of most likely tokens with mass >= top_p.

    Sorting 152k probabilities costs milliseconds per token; the nucleus is almost always
    small, so sort the top M first and widen M only when its mass falls short. Exact.
    """
    n = p.shape[0]
    m = 64
    while True:
        if m >= n:
            order = np.argsort(-p, kind="stable")
        else:
            part = np.argpartition(-p, m - 1)[:m]
            order = part[np.argsort(-p[part], kind="stable")]
        cum = np.cumsum(p[order])
        if cum[-1] >= top_p or m >= n:
            cut = int(np.searchsorted(cum, top_p)) + 1
            return order[: min(cut, order.shape[0])]
        m *= 8


def choose(probs: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn in proportion to `probs` (need not sum to 1): one uniform, one search."""
    c = np.cumsum(probs)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), probs.shape[0] - 1))
