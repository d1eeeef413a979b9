"""The stats line under an answer, worded as the CLI prints it."""

from __future__ import annotations

from typing import Any, Sequence

from ...widgets.controls.live_label import SEPARATOR  # the label keeps the pieces between these whole


def stats_text(s: dict[str, Any]) -> str:
    """The engine's one stats wording (engine/measure/report.py), as the CLI prints it."""
    from engine.measure.report import stats_line

    return stats_line(s, SEPARATOR, finish=False)


def last_answer_stats(messages: Sequence[Any]) -> str:
    """The stats line of the conversation's last answer, the version shown ("" when that one has
    none: failed, or no answer yet), never an earlier answer's or another version's figures."""
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    return stats_text(last.stats) if last is not None and last.stats else ""
