"""Sampling parameters, checked once for every caller (CLI, API, app, bench).
Imports: engine.errors only.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

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
