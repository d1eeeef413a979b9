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


_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
               "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_bytes(text: str) -> int:
    """'4M', '512k', '1.5GB' or '1048576' as bytes (binary units); ValueError naming the text."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"{text!r} is not a size: use bytes or a number with K, M or G (for example 4M)")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])
