"""The stats line under an answer, worded as the CLI prints it."""

from __future__ import annotations

from typing import Any

from ...widgets.live_label import SEPARATOR  # the label keeps the pieces between these whole


def stats_text(s: dict[str, Any]) -> str:
    """The engine's one stats wording (engine/measure/report.py), as the CLI prints it."""
    from engine.measure.report import stats_line

    return stats_line(s, SEPARATOR, finish=False)
