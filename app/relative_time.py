"""Short, relative dates for lists ("today 14:02", "yesterday", "Mon", "12 Nov"), as chat
apps show them: precise for recent items, compact for old ones."""

from __future__ import annotations

from datetime import datetime


def relative_date(ts: float, now: datetime | None = None) -> str:
    """When `ts` (seconds since the epoch, local time) was, relative to `now`."""
    now = now or datetime.now()
    when = datetime.fromtimestamp(ts)
    days = (now.date() - when.date()).days
    if days <= 0:
        return f"today {when:%H:%M}"
    if days == 1:
        return f"yesterday {when:%H:%M}"
    if days < 7:
        return f"{when:%a}"
    if when.year == now.year:
        return f"{when.day} {when:%b}"
    return f"{when.day} {when:%b} {when.year}"


def absolute_date(ts: float) -> str:
    """The full local date and time, for a tooltip."""
    return f"{datetime.fromtimestamp(ts):%Y-%m-%d %H:%M}"

