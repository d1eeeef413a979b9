"""Human-readable sizes and durations, shared by the CLI and the app."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """1234567 -> '1.2 MB' (decimal units, as download sizes are quoted)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def human_duration(s: float) -> str:
    """75 -> '1m15s'."""
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
