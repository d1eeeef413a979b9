"""How much of the machine's CPU other programs took while a run went on.

A race is two single runs, one after the other; on a machine that other programs keep busy
it measures the scheduler as much as speculation (docs/benchmarks.md, section 9: the same
target-alone run took 35 s, then 91 s, beside two busy programs). So the race says when the
machine was busy instead of presenting such a figure as the speed-up. Own CPU counts this
process and its live children (an RPC target's child process); everything else busy on the
machine is "other programs".
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil

BUSY = 0.25  # other programs took more than this share of all cores: the figures are not reliable


@dataclass(frozen=True)
class CpuSample:
    busy_s: float  # CPU seconds the whole machine spent busy, all cores
    own_s: float  # of which this process and its children
    at: float  # monotonic seconds
    cores: int


def sample() -> CpuSample | None:
    """The machine's and this process's CPU time now; None where the OS does not say."""
    try:
        t = psutil.cpu_times()
        busy = t.user + t.system + sum(getattr(t, f, 0.0) for f in ("nice", "irq", "softirq"))
        me = psutil.Process()
        own = _cpu_s(me)
        for child in me.children(recursive=True):
            try:
                own += _cpu_s(child)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return CpuSample(busy, own, time.monotonic(), psutil.cpu_count() or 1)
    except (psutil.Error, OSError, AttributeError):
        return None


def _cpu_s(p: psutil.Process) -> float:
    c = p.cpu_times()
    return c.user + c.system


def others_share(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """The share of all cores (0..1) that other programs used between two samples."""
    if before is None or after is None:
        return None
    wall = after.at - before.at
    if wall <= 0.05:
        return None
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return min(1.0, max(0.0, others / (wall * after.cores)))


def others_took(shares: dict[str, float | None]) -> str:
    """'' on a quiet machine; else how much other programs took, for the race's verdict:
    "5% of the CPU during the target-alone run and 62% during the speculative run"."""
    seen = {side: s for side, s in shares.items() if s is not None}
    if not seen or max(seen.values()) <= BUSY:
        return ""
    return " and ".join(f"{s:.0%} {'of the CPU ' if i == 0 else ''}during {side}" for i, (side, s) in enumerate(seen.items()))


__all__ = ["BUSY", "CpuSample", "sample", "others_share", "others_took"]
